#include "core/terminal.h"

#include <cstdint>
#include <cstdio>

#include "core/strings.h"

namespace kiln {

std::string terminal_text(std::string_view s, bool keep_newlines) {
  auto is_control = [&](std::uint32_t cp) {
    return (cp < 0x20 && !(cp == '\n' && keep_newlines) && cp != '\t') ||
           (cp >= 0x7f && cp <= 0x9f);
  };
  // What to show for the bytes at i ("" when they stay as they are); `length` is how many.
  auto shown = [&](std::size_t i, std::size_t& length) -> std::string {
    char buf[8];
    std::uint32_t cp = 0;
    length = utf8_char_length(s, i, &cp);
    if (length == 0) {  // not the start of a well-formed character: this byte alone
      length = 1;
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      return buf;
    }
    if (!is_control(cp)) return "";
    std::snprintf(buf, sizeof buf, cp < 0x80 ? "\\x%02x" : "U+%04X", static_cast<unsigned>(cp));
    return buf;
  };
  std::string out;
  std::size_t copied = 0;  // s[copied, i) goes out as it is
  for (std::size_t i = 0, length = 0; i < s.size(); i += length) {
    std::string instead = shown(i, length);
    if (instead.empty()) continue;
    out.append(s.substr(copied, i - copied)).append(instead);
    copied = i + length;
  }
  if (copied == 0) return std::string(s);
  return out.append(s.substr(copied));
}

}  // namespace kiln
