// The only ways text reaches a target file that `kiln target init` writes: TOML basic strings and
// comment lines. Much of that text is a stranger's (an index's file names, a wheel's METADATA), so
// both encoders are total: whatever the bytes, the result parses back as exactly one string (or
// one comment) and never becomes TOML structure.
#pragma once

#include <string>
#include <string_view>

namespace kiln::init {

// A TOML basic string ("..."): quotes and backslashes escaped, control characters as \u00XX,
// invalid UTF-8 bytes as U+FFFD (TOML documents are UTF-8).
std::string toml_string(std::string_view text);

// One comment line, "# <text>\n": control characters (line breaks among them) and invalid UTF-8
// shown escaped ("\x0a", as on a terminal), so the comment ends where kiln ends it.
std::string toml_comment(std::string_view text);

}  // namespace kiln::init
