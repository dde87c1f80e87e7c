// Text from strangers on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// `text` safe to print on a terminal, whatever bytes a stranger chose. UTF-8 is decoded strictly:
// a byte that does not start a well-formed character (0x80-0xff outside a valid sequence, a
// truncated sequence, an overlong form, a surrogate, anything past U+10FFFF) is shown as "\\x9b";
// every control character but line feed and tab (C0, DEL: escape sequences, carriage returns,
// backspaces that could hide or forge what kiln says) as "\\x1b", a C1 control (U+0080..U+009F,
// well-formed) as "U+009B"; every other character as it is. Without `keep_newlines`, line feeds
// too (one field of a line, which must not start a forged line). The result is valid UTF-8.
std::string terminal_text(std::string_view text, bool keep_newlines = true);

}  // namespace kiln
