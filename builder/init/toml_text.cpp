#include "init/toml_text.h"

#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::init {

namespace {

// The length of the valid UTF-8 sequence at the start of `text`, 0 when there is none.
std::size_t utf8_length(std::string_view text) {
  auto lead = static_cast<unsigned char>(text[0]);
  std::size_t n = lead < 0x80         ? 1
                  : (lead >> 5) == 6  ? 2
                  : (lead >> 4) == 14 ? 3
                  : (lead >> 3) == 30 ? 4
                                      : 0;
  if (n == 0 || n > text.size()) return 0;
  return is_valid_utf8(text.substr(0, n)) ? n : 0;
}

}  // namespace

std::string toml_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  while (!text.empty()) {
    std::size_t n = utf8_length(text);
    auto c = static_cast<unsigned char>(text[0]);
    if (n == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      n = 1;
    } else if (c == '"' || c == '\\') {
      out += cat("\\", std::string(1, static_cast<char>(c)));
    } else if (c < 0x20 || c == 0x7f) {
      out += cat("\\u00", kHex[c >> 4], kHex[c & 0xf]);
    } else {
      out.append(text.substr(0, n));
    }
    text.remove_prefix(n);
  }
  return out + "\"";
}

std::string toml_comment(std::string_view text) {
  std::string shown = terminal_text(text, /*keep_newlines=*/false);
  // TOML allows tabs in comments, and terminal_text keeps them; the rest it escapes. Invalid UTF-8
  // (which terminal_text may leave for a terminal to show) is replaced here.
  std::string out = "# ";
  while (!shown.empty()) {
    std::size_t n = utf8_length(shown);
    auto c = static_cast<unsigned char>(shown[0]);
    if (n == 0) {
      out += "\\x";
      out += "0123456789abcdef"[c >> 4];
      out += "0123456789abcdef"[c & 0xf];
      n = 1;
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      out += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 0xf]);
    } else {
      out.append(shown.substr(0, n));
    }
    shown.erase(0, n);
  }
  return out + "\n";
}

}  // namespace kiln::init
