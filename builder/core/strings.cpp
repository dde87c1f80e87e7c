#include "core/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <utility>

#include "core/terminal.h"

namespace kiln {

std::vector<std::string> split(std::string_view text, std::string_view separators,
                               bool skip_empty) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find_first_of(separators, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start || !skip_empty) parts.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

std::string_view trim(std::string_view text) {
  const char* ws = " \t\r\n";
  std::size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  std::size_t e = text.find_last_not_of(ws);
  return text.substr(b, e - b + 1);
}

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool is_hex(std::string_view text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; });
}

bool is_valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len = utf8_char_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::size_t utf8_char_length(std::string_view s, std::size_t i, std::uint32_t* code_point) {
  if (i >= s.size()) return 0;
  auto c = static_cast<unsigned char>(s[i]);
  std::size_t len = c < 0x80           ? 1
                    : (c >> 5) == 0x6  ? 2
                    : (c >> 4) == 0xe  ? 3
                    : (c >> 3) == 0x1e ? 4
                                       : 0;
  if (len == 0 || len > s.size() - i) return 0;
  std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (std::size_t k = 1; k < len; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static const std::uint32_t min_by_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_by_len[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  if (code_point) *code_point = cp;
  return len;
}

std::string control_character(std::string_view s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      return buf;
    }
    // C1 controls (U+0080..U+009F, among them U+0085 NEL) are C2 80..C2 9F in UTF-8.
    if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) <= 0x9f &&
        static_cast<unsigned char>(s[i + 1]) >= 0x80) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "U+%04X", static_cast<unsigned char>(s[i + 1]));
      return buf;
    }
    // U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: E2 80 A8 and E2 80 A9.
    if (c == 0xe2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xa8 ||
         static_cast<unsigned char>(s[i + 2]) == 0xa9))
      return static_cast<unsigned char>(s[i + 2]) == 0xa8 ? "U+2028" : "U+2029";
  }
  return "";
}

std::string printable_excerpt(std::string_view text, std::size_t max) {
  std::string out;
  for (char c : text.substr(0, max))
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (text.size() > max) out += "...";
  return out;
}

namespace {

// A run of 1 to `max_digits` decimal digits as a number; nullopt for anything else.
std::optional<std::uint64_t> parse_digits(std::string_view text, std::size_t max_digits) {
  if (text.empty() || text.size() > max_digits) return std::nullopt;
  std::uint64_t value = 0;
  for (char c : text) {
    if (!is_ascii_digit(c)) return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return value;
}

// What a unit letter (either case) stands for in `units`; 0 when it is none of them.
std::int64_t unit_value(char letter, std::initializer_list<std::pair<char, std::int64_t>> units) {
  if (letter >= 'A' && letter <= 'Z') letter = static_cast<char>(letter - 'A' + 'a');
  for (const auto& [unit, value] : units)
    if (unit == letter) return value;
  return 0;
}

}  // namespace

std::optional<std::uint64_t> parse_byte_size(std::string_view text) {
  if (text.empty() || text.size() > 32) return std::nullopt;
  int shift =
      static_cast<int>(unit_value(text.back(), {{'k', 10}, {'m', 20}, {'g', 30}, {'t', 40}}));
  if (shift) text.remove_suffix(1);
  std::string_view whole = text, fraction;
  if (auto dot = text.find('.'); dot != std::string_view::npos) {
    if (!shift) return std::nullopt;  // bytes are whole
    whole = text.substr(0, dot);
    fraction = text.substr(dot + 1);
    if (fraction.empty()) return std::nullopt;
  }
  auto value = parse_digits(whole, 19);  // < 10^19 < 2^64
  if (!value || *value > (UINT64_MAX >> shift)) return std::nullopt;
  std::uint64_t bytes = *value << shift;
  if (!fraction.empty()) {
    auto digits = parse_digits(fraction, 6);  // < 10^6 < 2^20: times 2^40 stays below 2^64
    if (!digits) return std::nullopt;
    std::uint64_t scale = 1;
    for (std::size_t i = 0; i < fraction.size(); ++i) scale *= 10;
    std::uint64_t part = (*digits << shift) / scale;
    if (bytes > UINT64_MAX - part) return std::nullopt;
    bytes += part;
  }
  return bytes;
}

std::optional<std::int64_t> parse_duration(std::string_view text) {
  if (text.size() < 2 || text.size() > 32) return std::nullopt;
  std::int64_t unit =
      unit_value(text.back(), {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}, {'w', 7 * 86400}});
  if (!unit) return std::nullopt;
  auto value = parse_digits(text.substr(0, text.size() - 1), 18);  // < 10^18 < 2^63
  if (!value || *value > static_cast<std::uint64_t>(INT64_MAX / unit)) return std::nullopt;
  return static_cast<std::int64_t>(*value) * unit;
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& candidate : candidates) {
    std::size_t d = edit_distance(lower(word), lower(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

std::string shell_quote(std::string_view word) {
  // zsh expands a word that starts with '=' (=cmd: its path); elsewhere '=' is plain.
  bool plain =
      !word.empty() && word.front() != '=' && std::all_of(word.begin(), word.end(), [](char c) {
        return is_ascii_alnum(c) ||
               std::string_view("-_./=:,+@%").find(c) != std::string_view::npos;
      });
  if (plain) return std::string(word);
  if (word.empty()) return "''";
  // Runs between apostrophes in single quotes, each apostrophe as \' (no empty '' pieces).
  std::string out;
  std::size_t at = 0;
  while (at < word.size()) {
    auto quote = std::min(word.find('\'', at), word.size());
    if (quote > at) out += cat("'", word.substr(at, quote - at), "'");
    if (quote < word.size()) out += "\\'";
    at = quote + 1;
  }
  return out;
}

std::optional<std::string> shell_command(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) {
    if (terminal_text(word, /*keep_newlines=*/false) != word) return std::nullopt;
    line += cat(line.empty() ? "" : " ", shell_quote(word));
  }
  return line;
}

}  // namespace kiln
