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
// The length (1 to 4) of the well-formed UTF-8 character that starts at text[at], or 0 when none
// does (a continuation byte, a truncated sequence, an overlong form, a surrogate, past U+10FFFF);
// with `code_point`, that character's code point is stored there.
std::size_t utf8_char_length(std::string_view text, std::size_t at,
                             std::uint32_t* code_point = nullptr);
// The first character of `text` that breaks a line for Python's str.splitlines() (\n \r \v \f
// \x1c \x1d \x1e U+0085 U+2028 U+2029) or is any other control character (C0, DEL, C1), as
// "\\x0d" or "U+2028"; "" when there is none. Names kiln writes into line-based files (RECORD,
// METADATA) or shows in messages must have none.
std::string control_character(std::string_view text);
// At most `max` characters of `text` for a message, control characters shown as '?'.
std::string printable_excerpt(std::string_view text, std::size_t max = 60);
// "4096", "512K", "64m", "4G", "1.5T" (K, M, G, T in either case: powers of 1024; a fraction of at
// most 6 digits only with a suffix, rounded down to whole bytes) as bytes; nullopt for anything
// else (signs, spaces, "GB", more than 32 characters) or a value past 2^64 - 1.
std::optional<std::uint64_t> parse_byte_size(std::string_view text);
// "90s", "30m", "12h", "30d", "2w" (a whole number and one unit, either case: seconds, minutes,
// hours, days, weeks) as seconds; nullopt for anything else or a value past 2^63 - 1.
std::optional<std::int64_t> parse_duration(std::string_view text);
// The candidate closest to `word` when it is close enough to be a likely typo, else "".
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);
// Quote a string for a shell line shown to a person (or in a script kiln writes: POSIX quoting):
// as it is when every character is one no POSIX shell, bash or zsh treats specially, else in single
// quotes (a quote inside as '\''), where nothing is special.
std::string shell_quote(std::string_view word);
// The command line a person pastes into sh, dash, bash or zsh that runs exactly `argv`: every word
// through shell_quote, joined by one space. Every command kiln prints is made here from its words,
// never by joining text. nullopt when a word holds what a terminal would not show as itself (a
// control character, a byte of no UTF-8 character, a bidirectional control: terminal_text): that
// line could not be printed faithfully, and its caller says so instead.
std::optional<std::string> shell_command(const std::vector<std::string>& argv);

// ASCII classes, whatever the locale: [0-9], [a-z], [A-Za-z], [A-Za-z0-9], and isspace() of the C
// locale (" \t\n\v\f\r", what a regular expression's \s matched).
inline bool is_ascii_digit(char c) {
  return c >= '0' && c <= '9';
}
inline bool is_ascii_lower(char c) {
  return c >= 'a' && c <= 'z';
}
inline bool is_ascii_alpha(char c) {
  return is_ascii_lower(c) || (c >= 'A' && c <= 'Z');
}
inline bool is_ascii_alnum(char c) {
  return is_ascii_alpha(c) || is_ascii_digit(c);
}
inline bool is_ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r');
}

// A cursor for hand-written matchers of untrusted text (kiln has no std::regex: libstdc++'s
// recursion overflows the stack on long input). Every call looks at or consumes characters at the
// cursor and never goes back, so a matcher built from it is linear in the text and uses no stack.
class Scanner {
 public:
  explicit Scanner(std::string_view text) : text_(text) {}
  bool done() const { return pos_ == text_.size(); }
  std::size_t pos() const { return pos_; }
  std::string_view rest() const { return text_.substr(pos_); }
  // The character `ahead` places past the cursor, '\0' past the end (test done() for the end).
  char peek(std::size_t ahead = 0) const {
    return ahead < text_.size() - pos_ ? text_[pos_ + ahead] : '\0';
  }
  bool at(std::string_view s) const { return rest().substr(0, s.size()) == s; }
  // Consumes `c` or `s` when the text continues with it.
  bool skip(char c) { return skip(std::string_view(&c, 1)); }
  bool skip(std::string_view s) {
    if (!at(s)) return false;
    pos_ += s.size();
    return true;
  }
  // Consumes the longest run of characters `pred` accepts and returns it (maybe empty).
  template <class Pred>
  std::string_view take_while(Pred pred) {
    std::size_t start = pos_;
    while (pos_ < text_.size() && pred(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  std::string_view skip_spaces() { return take_while(is_ascii_space); }
  // What was consumed since `start` (a pos()).
  std::string_view since(std::size_t start) const { return text_.substr(start, pos_ - start); }

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
};

}  // namespace kiln
