#include "manifest/diagnostic.h"

#include "core/strings.h"

namespace kiln::manifest {

Error located_error(const SourceText& source, Position at, std::string_view message) {
  if (at.line <= 0) return Error::bad_input(cat(source.path, ": ", message));
  std::string detail;
  auto lines = split(source.text, "\n", /*skip_empty=*/false);
  if (at.line <= static_cast<int>(lines.size())) {
    std::string line = lines[static_cast<std::size_t>(at.line - 1)];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::string caret;
    for (int i = 1; i < at.column && i <= static_cast<int>(line.size()); ++i)
      caret += line[static_cast<std::size_t>(i - 1)] == '\t' ? '\t' : ' ';
    detail = cat("  ", line, "\n  ", caret, "^");
  }
  return Error::bad_input(cat(source.path, ":", at.line, ":", std::max(at.column, 1), ": ", message),
                          detail);
}

void fail_at(const SourceText& source, Position at, std::string_view message) {
  raise(located_error(source, at, message));
}

}  // namespace kiln::manifest
