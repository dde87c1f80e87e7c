// Text from strangers on a terminal.
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// `text` safe to print on a terminal: every control character but line feed and tab (C0, DEL, C1:
// escape sequences, carriage returns, backspaces that could hide or forge what kiln says about
// bytes a stranger chose) shown as "\\x1b" or "U+009B"; the rest as it is. Without
// `keep_newlines`, line feeds too (one field of a line, which must not start a forged line).
std::string terminal_text(std::string_view text, bool keep_newlines = true);

}  // namespace kiln
