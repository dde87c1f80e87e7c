#include "core/terminal.h"

#include <cstdio>

namespace kiln {

std::string terminal_text(std::string_view s, bool keep_newlines) {
  auto is_c1 = [&](std::size_t i) {  // U+0080..U+009F are C2 80..C2 9F in UTF-8
    return static_cast<unsigned char>(s[i]) == 0xc2 && i + 1 < s.size() &&
           static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
           static_cast<unsigned char>(s[i + 1]) <= 0x9f;
  };
  auto is_control = [&](std::size_t i) {
    auto c = static_cast<unsigned char>(s[i]);
    return ((c < 0x20 || c == 0x7f) && !(c == '\n' && keep_newlines) && c != '\t') || is_c1(i);
  };
  std::size_t first = 0;
  while (first < s.size() && !is_control(first)) ++first;
  if (first == s.size()) return std::string(s);
  std::string out(s.substr(0, first));
  for (std::size_t i = first; i < s.size(); ++i) {
    char buf[8];
    if (is_c1(i)) {
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned char>(s[++i]));
      out += buf;
    } else if (is_control(i)) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      out += buf;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace kiln
