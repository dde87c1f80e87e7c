// Small string helpers shared by every stage.
#pragma once

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

// cat("a", 1, 'b') == "a1b": streams every argument into one string.
template <class... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

std::vector<std::string> split(std::string_view text, std::string_view separators,
                               bool skip_empty = true);
std::string_view trim(std::string_view text);
std::string join(const std::vector<std::string>& parts, std::string_view separator);
std::string lower(std::string_view text);
bool is_hex(std::string_view text);
// Well-formed UTF-8: no overlong forms, no surrogates, nothing past U+10FFFF.
bool is_valid_utf8(std::string_view text);
// The first character of `text` that breaks a line for Python's str.splitlines() (\n \r \v \f
// \x1c \x1d \x1e U+0085 U+2028 U+2029) or is any other control character (C0, DEL, C1), as
// "\\x0d" or "U+2028"; "" when there is none. Names kiln writes into line-based files (RECORD,
// METADATA) or shows in messages must have none.
std::string control_character(std::string_view text);
// At most `max` characters of `text` for a message, control characters shown as '?'.
std::string printable_excerpt(std::string_view text, std::size_t max = 60);
// "4096", "512K", "64M", "4G" (powers of 1024) as bytes; nullopt for anything else or overflow.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);
std::size_t edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a likely typo, else "".
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);
// Quote a string for a shell line shown to a person (or in a script kiln writes: POSIX quoting).
std::string shell_quote(std::string_view word);

}  // namespace kiln
