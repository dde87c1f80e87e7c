#include "manifest/version.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

// A PEP 440 number in canonical form: "0", or digits without a leading zero.
bool is_canonical_number(std::string_view digits) {
  return !digits.empty() && (digits.size() == 1 || digits[0] != '0');
}

// Two canonical numbers by value, of any length (no overflow): the longer is larger, else the
// first differing digit decides. < 0, 0, > 0.
int compare_numbers(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

// Numbers are kept as their digits (views into the text), compared by compare_numbers.
struct ParsedVersion {
  std::string_view epoch = "0";
  std::vector<std::string_view> release;
  int pre_kind = 3;  // 0 a, 1 b, 2 rc, 3 none
  std::string_view pre = "0";
  std::string_view post;  // "": not a post release
  std::string_view dev;   // "": not a dev release
};

// A canonical public version, [N!]N(.N)*[{a|b|rc}N][.postN][.devN], every N "0" or without a
// leading zero (what ^(?:([1-9][0-9]*)!)?((?:0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*))*)
// (?:(a|b|rc)(0|[1-9][0-9]*))?(?:\.post(0|[1-9][0-9]*))?(?:\.dev(0|[1-9][0-9]*))?$ matched).
// Each part is decided by the next character, so nothing is tried twice.
bool parse_version(std::string_view text, ParsedVersion& v) {
  Scanner s(text);
  std::string_view n = s.take_while(is_ascii_digit);
  if (s.skip('!')) {
    if (n.empty() || n[0] == '0') return false;
    v.epoch = n;
    n = s.take_while(is_ascii_digit);
  }
  if (!is_canonical_number(n)) return false;
  v.release.push_back(n);
  while (s.peek() == '.' && is_ascii_digit(s.peek(1))) {
    s.skip('.');
    n = s.take_while(is_ascii_digit);
    if (!is_canonical_number(n)) return false;
    v.release.push_back(n);
  }
  int kind = s.skip('a') ? 0 : s.skip('b') ? 1 : s.skip("rc") ? 2 : 3;
  if (kind != 3) {
    v.pre_kind = kind;
    v.pre = s.take_while(is_ascii_digit);
    if (!is_canonical_number(v.pre)) return false;
  }
  if (s.skip(".post")) {
    v.post = s.take_while(is_ascii_digit);
    if (!is_canonical_number(v.post)) return false;
  }
  if (s.skip(".dev")) {
    v.dev = s.take_while(is_ascii_digit);
    if (!is_canonical_number(v.dev)) return false;
  }
  return s.done();
}

// An invalid version sorts as the default ParsedVersion (its release empty, padded with zeros).
ParsedVersion parse_for_ordering(std::string_view text) {
  ParsedVersion v;
  if (!parse_version(text, v)) return ParsedVersion{};
  while (v.release.size() > 1 && v.release.back() == "0") v.release.pop_back();
  return v;
}

// One specifier, OP VERSION[.*] with white space around either (what
// ^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9]+!)?[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?
// (\.dev[0-9]+)?(\.\*)?\s*$ matched). The longest operator is taken: a digit must follow it.
bool is_valid_specifier(std::string_view text) {
  Scanner s(text);
  s.skip_spaces();
  if (!(s.skip("~=") || s.skip("===") || s.skip("==") || s.skip("!=") || s.skip("<=") ||
        s.skip(">=") || s.skip('<') || s.skip('>')))
    return false;
  s.skip_spaces();
  if (s.take_while(is_ascii_digit).empty()) return false;
  if (s.skip('!') && s.take_while(is_ascii_digit).empty()) return false;
  while (s.peek() == '.' && is_ascii_digit(s.peek(1))) {
    s.skip('.');
    s.take_while(is_ascii_digit);
  }
  if ((s.skip('a') || s.skip('b') || s.skip("rc")) && s.take_while(is_ascii_digit).empty())
    return false;
  if (s.skip(".post") && s.take_while(is_ascii_digit).empty()) return false;
  if (s.skip(".dev") && s.take_while(is_ascii_digit).empty()) return false;
  s.skip(".*");
  s.skip_spaces();
  return s.done();
}

bool is_name_char(char c) {
  return is_ascii_alnum(c) || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_valid_project_name(std::string_view name) {
  return !name.empty() && is_ascii_alnum(name.front()) && is_ascii_alnum(name.back()) &&
         std::all_of(name.begin(), name.end(), is_name_char);
}

std::string normalize_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '-';
      in_run = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_run = false;
    }
  }
  return out;
}

std::string wheel_name(std::string_view name) {
  std::string out = normalize_name(name);
  for (char& c : out)
    if (c == '-') c = '_';
  return out;
}

bool is_valid_version(std::string_view version) {
  ParsedVersion v;
  return parse_version(version, v);
}

int compare_versions(std::string_view a, std::string_view b) {
  ParsedVersion x = parse_for_ordering(a), y = parse_for_ordering(b);
  if (int c = compare_numbers(x.epoch, y.epoch)) return c;
  std::size_t n = std::max(x.release.size(), y.release.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::string_view p = i < x.release.size() ? x.release[i] : "0";
    std::string_view q = i < y.release.size() ? y.release[i] : "0";
    if (int c = compare_numbers(p, q)) return c;
  }
  // A dev release without pre/post sorts before the pre-releases of its release.
  auto pre_kind = [](const ParsedVersion& v) {
    return (v.pre_kind == 3 && v.post.empty() && !v.dev.empty()) ? -1 : v.pre_kind;
  };
  if (pre_kind(x) != pre_kind(y)) return pre_kind(x) < pre_kind(y) ? -1 : 1;
  if (int c = compare_numbers(x.pre, y.pre)) return c;
  // No post release sorts first; no dev release sorts last.
  if (x.post.empty() != y.post.empty()) return x.post.empty() ? -1 : 1;
  if (int c = compare_numbers(x.post, y.post)) return c;
  if (x.dev.empty() != y.dev.empty()) return x.dev.empty() ? 1 : -1;
  return compare_numbers(x.dev, y.dev);
}

bool is_valid_specifier_set(std::string_view specifiers) {
  if (trim(specifiers).empty()) return false;
  for (const auto& part : split(specifiers, ",", /*skip_empty=*/false)) {
    if (!is_valid_specifier(part)) return false;
  }
  return true;
}

// name [extras] [specifiers | @ url] [; marker]; the marker is checked only for being present.
// What ^\s*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])\s*(\[\s*[A-Za-z0-9._-]+
// (\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*(\(?\s*([<>=!~@][^;()]*)\)?)?\s*(;\s*\S.*)?$ matched, then
// the specifiers checked as a set. No part can end early and leave the rest to the next (each
// stops at a character the next must start with), so one pass decides.
bool is_valid_requirement(std::string_view requirement) {
  // A requirement becomes a line of METADATA: no line breaks, no control characters but the tab
  // (PEP 508 whitespace).
  std::string untabbed(requirement);
  std::replace(untabbed.begin(), untabbed.end(), '\t', ' ');
  if (!control_character(untabbed).empty()) return false;
  Scanner s(requirement);
  s.skip_spaces();
  if (!is_valid_project_name(s.take_while(is_name_char))) return false;
  s.skip_spaces();
  if (s.skip('[')) {  // [extra, extra]
    do {
      s.skip_spaces();
      if (s.take_while(is_name_char).empty()) return false;
      s.skip_spaces();
    } while (s.skip(','));
    if (!s.skip(']')) return false;
  }
  s.skip_spaces();
  auto is_operator = [](char c) {
    return std::string_view("<>=!~@").find(c) != std::string_view::npos;
  };
  std::string_view spec;
  if (s.peek() == '(' || (!s.done() && is_operator(s.peek()))) {  // [(] OP anything but ;() [)]
    s.skip('(');
    s.skip_spaces();
    if (s.done() || !is_operator(s.peek())) return false;
    std::size_t start = s.pos();
    s.skip(s.peek());
    s.take_while([](char c) { return c != ';' && c != '(' && c != ')'; });
    spec = trim(s.since(start));
    s.skip(')');
  }
  s.skip_spaces();
  if (s.skip(';')) {  // a marker: something not blank
    s.skip_spaces();
    if (s.done()) return false;
  } else if (!s.done()) {
    return false;
  }
  return spec.empty() || spec[0] == '@' || is_valid_specifier_set(spec);
}

std::string requirement_name(std::string_view requirement) {
  std::string_view t = trim(requirement);
  std::size_t end = 0;
  while (end < t.size() && (std::isalnum(static_cast<unsigned char>(t[end])) || t[end] == '-' ||
                            t[end] == '_' || t[end] == '.'))
    ++end;
  return normalize_name(t.substr(0, end));
}

}  // namespace kiln::manifest
