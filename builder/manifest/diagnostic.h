// Errors that point into a file: "FILE:LINE:COL: message", then the line and a caret under COL.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace kiln::manifest {

struct SourceText {
  std::string path;  // as shown to the user (relative when it was given relative)
  std::string text;
};

struct Position {
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based
};

// A BadInput error located in `source`.
Error located_error(const SourceText& source, Position at, std::string_view message);

// Thrown inside the parsers and turned into Expected at their boundary.
[[noreturn]] void fail_at(const SourceText& source, Position at, std::string_view message);

}  // namespace kiln::manifest
