#include "manifest/diagnostic.h"

#include "core/strings.h"

namespace kiln::manifest {

namespace {

constexpr std::size_t kContext = 60;  // bytes of the line shown on each side of the column

bool continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xc0) == 0x80;
}

// The part of `line` around byte `col` (0-based), at most kContext bytes each side and cut at
// character boundaries, control characters but tabs shown as '?'; and its caret line.
std::string excerpt_with_caret(const std::string& line, std::size_t col) {
  std::size_t from = col > kContext ? col - kContext : 0;
  std::size_t to = std::min(line.size(), col + kContext);
  while (from > 0 && from < line.size() && continuation(line[from])) --from;
  while (to < line.size() && continuation(line[to])) ++to;
  std::string shown = from > 0 ? "..." : "", caret = from > 0 ? "   " : "";
  for (std::size_t i = from; i < to; ++i) {
    char c = line[i];
    bool control = (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
    shown += control ? '?' : c;
    if (i < col && !continuation(c)) caret += c == '\t' ? '\t' : ' ';
  }
  if (to < line.size()) shown += "...";
  return cat("  ", shown, "\n  ", caret, "^");
}

}  // namespace

Error located_error(const SourceText& source, Position at, std::string_view message_text) {
  // A message may quote a value of the file: never whole pages of it, nor its control characters.
  const std::string message = printable_excerpt(message_text, 500);
  if (at.line <= 0) return Error::bad_input(cat(source.path, ": ", message));
  std::string detail;
  auto lines = split(source.text, "\n", /*skip_empty=*/false);
  if (at.line <= static_cast<int>(lines.size())) {
    std::string line = lines[static_cast<std::size_t>(at.line - 1)];
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::size_t col = std::min(static_cast<std::size_t>(std::max(at.column, 1) - 1), line.size());
    detail = excerpt_with_caret(line, col);
  }
  return Error::bad_input(
      cat(source.path, ":", at.line, ":", std::max(at.column, 1), ": ", message), detail);
}

void fail_at(const SourceText& source, Position at, std::string_view message) {
  raise(located_error(source, at, message));
}

}  // namespace kiln::manifest
