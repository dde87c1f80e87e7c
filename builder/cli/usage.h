// Command-line mistakes as kiln's own errors: "kiln: error: …" (exit 2), naming an unknown command
// or option with the nearest known one ("did you mean …?").
#pragma once

#include <string>

namespace CLI {
class App;
class Error;
class Validator;
}  // namespace CLI

namespace kiln::cli {

// The error line for a failed parse of argv by `app` (without "kiln: error: "), and the hint line
// that follows it.
struct Usage {
  std::string message;
  std::string hint;
};
Usage usage_error(CLI::App& app, const CLI::Error& error, int argc, char** argv);

// A count that is 0 or more (--jobs): CLI11's NonNegativeNumber prints DBL_MAX as its bound.
CLI::Validator non_negative_count();

}  // namespace kiln::cli
