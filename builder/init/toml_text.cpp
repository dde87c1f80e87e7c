#include "init/toml_text.h"

#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::init {

std::string toml_string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  while (!text.empty()) {
    std::size_t n = utf8_char_length(text, 0);
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
  // terminal_text shows every control character but a tab (which TOML allows in a comment) and
  // every byte of no UTF-8 character escaped: what is left is one line of valid UTF-8.
  return cat("# ", terminal_text(text, /*keep_newlines=*/false), "\n");
}

}  // namespace kiln::init
