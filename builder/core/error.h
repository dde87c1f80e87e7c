// Errors: one type for every failure kiln reports, with the exit code it maps to.
#pragma once

#include <exception>
#include <string>

namespace kiln {

enum class ErrorKind {
  BadInput,     // exit 2: malformed manifest, target, argument or archive
  Failed,       // exit 1: a build, download or check failed
  Interrupted,  // exit 130: SIGINT/SIGTERM
};

int exit_code(ErrorKind kind);

struct Error {
  ErrorKind kind = ErrorKind::Failed;
  std::string message;  // one line, printed after "kiln: error: "
  std::string detail;   // optional further lines (source line and caret, log tail)

  static Error bad_input(std::string message, std::string detail = {});
  static Error failed(std::string message, std::string detail = {});
  static Error interrupted(std::string message = "interrupted");
};

// Thrown at the boundary between leaves (which return Expected) and the CLI, which catches once.
class KilnError : public std::exception {
 public:
  explicit KilnError(Error error) : error_(std::move(error)) {}
  const Error& error() const noexcept { return error_; }
  const char* what() const noexcept override { return error_.message.c_str(); }

 private:
  Error error_;
};

[[noreturn]] void raise(Error error);

}  // namespace kiln
