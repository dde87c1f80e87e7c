#include "manifest/version.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "manifest/marker.h"

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

// Python's \s for ASCII text: space, \t \n \v \f \r and \x1c-\x1f.
bool is_py_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f');
}

// A cursor for packaging's version patterns, which it compiles with re.IGNORECASE.
struct Cursor {
  std::string_view t;
  std::size_t p = 0;
  char peek(std::size_t ahead = 0) const { return p + ahead < t.size() ? t[p + ahead] : '\0'; }
  bool done() const { return p == t.size(); }
  bool skip_ci(std::string_view word) {
    if (t.size() - p < word.size()) return false;
    for (std::size_t i = 0; i < word.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(t[p + i])) != word[i]) return false;
    p += word.size();
    return true;
  }
  std::size_t digits() {
    std::size_t start = p;
    while (is_ascii_digit(peek())) ++p;
    return p - start;
  }
  bool separator() {  // [-_.]
    if (peek() != '-' && peek() != '_' && peek() != '.') return false;
    ++p;
    return true;
  }
  void spaces() {
    while (p < t.size() && is_py_space(t[p])) ++p;
  }
};

// Which of packaging's version patterns: Version's own, or a specifier's after ==/!= (a trailing
// .* or a local label allowed), ~= (two release numbers at least, no local label) or <= >= < >.
enum class VersionForm { Plain, Equality, Compatible, Ordered };

// What packaging's version pattern takes at the cursor: v? (N!)? N(.N)* then each optional part
// [-_.]?(alpha|a|beta|b|preview|pre|c|rc)[-_.]?N?, (-N|[-_.]?(post|rev|r)[-_.]?N?),
// [-_.]?dev[-_.]?N?, +local, taken possessively (a part that starts is kept) as its ?+ and *+
// quantifiers do. False when no release number follows.
bool match_version(Cursor& c, VersionForm form) {
  c.skip_ci("v");
  std::size_t start = c.p;
  if (!(c.digits() > 0 && c.peek() == '!' && (++c.p, true))) c.p = start;
  if (c.digits() == 0) return false;
  int parts = 1;
  for (; c.peek() == '.' && is_ascii_digit(c.peek(1)); ++parts) {
    ++c.p;
    c.digits();
  }
  if (form == VersionForm::Compatible && parts < 2) return false;
  if (form == VersionForm::Equality && c.peek() == '.' && c.peek(1) == '*') {
    c.p += 2;
    return true;
  }
  std::size_t save = c.p;
  c.separator();
  if (c.skip_ci("alpha") || c.skip_ci("a") || c.skip_ci("beta") || c.skip_ci("b") ||
      c.skip_ci("preview") || c.skip_ci("pre") || c.skip_ci("c") || c.skip_ci("rc")) {
    c.separator();
    c.digits();
  } else {
    c.p = save;
  }
  save = c.p;
  if (c.peek() == '-' && is_ascii_digit(c.peek(1))) {
    ++c.p;
    c.digits();
  } else if (c.separator(), c.skip_ci("post") || c.skip_ci("rev") || c.skip_ci("r")) {
    c.separator();
    c.digits();
  } else {
    c.p = save;
  }
  save = c.p;
  c.separator();
  if (c.skip_ci("dev")) {
    c.separator();
    c.digits();
  } else {
    c.p = save;
  }
  bool local = form == VersionForm::Plain || form == VersionForm::Equality;
  if (local && c.peek() == '+' && is_ascii_alnum(c.peek(1))) {
    ++c.p;
    while (is_ascii_alnum(c.peek())) ++c.p;
    while (c.separator()) {
      if (!is_ascii_alnum(c.peek())) return --c.p, true;
      while (is_ascii_alnum(c.peek())) ++c.p;
    }
  }
  return true;
}

// One specifier as packaging's Specifier takes it (the whole text, white space around it):
// === and anything but white space, ';' and ')'; ==/!= VERSION[.*|+local]; ~= VERSION with two
// release numbers; <= >= < > VERSION.
bool is_valid_specifier(std::string_view text) {
  Cursor c{text};
  c.spaces();
  if (c.skip_ci("===")) {
    c.spaces();
    std::size_t start = c.p;
    while (!c.done() && !is_py_space(c.peek()) && c.peek() != ';' && c.peek() != ')') ++c.p;
    if (c.p == start) return false;
  } else {
    VersionForm form;
    if (c.skip_ci("==") || c.skip_ci("!="))
      form = VersionForm::Equality;
    else if (c.skip_ci("~="))
      form = VersionForm::Compatible;
    else if (c.skip_ci("<=") || c.skip_ci(">=") || c.skip_ci("<") || c.skip_ci(">"))
      form = VersionForm::Ordered;
    else
      return false;
    c.spaces();
    if (!match_version(c, form)) return false;
  }
  c.spaces();
  return c.done();
}

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_py_space);
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

bool is_pep440_version(std::string_view version) {
  Cursor c{version};
  c.spaces();
  if (!match_version(c, VersionForm::Plain)) return false;
  c.spaces();
  return c.done();
}

// packaging's SpecifierSet: the parts between commas, blank ones skipped, each a specifier. kiln
// refuses a blank set (packaging's empty SpecifierSet): a field that is there must say something.
bool is_valid_specifier_set(std::string_view specifiers) {
  if (is_blank(specifiers)) return false;
  for (const auto& part : split(specifiers, ",", /*skip_empty=*/false))
    if (!is_blank(part) && !is_valid_specifier(part)) return false;
  return true;
}

namespace {

bool is_requirement_ws(char c) {
  return c == ' ' || c == '\t';
}

// IDENTIFIER: [A-Za-z0-9][A-Za-z0-9._-]* ending at a word boundary, which in a valid
// requirement means it ends with a letter, digit or '_' (packaging takes "a_", not "a-").
bool take_identifier(Cursor& c) {
  if (!is_ascii_alnum(c.peek())) return false;
  while (is_name_char(c.peek())) ++c.p;
  char last = c.t[c.p - 1];
  return is_ascii_alnum(last) || last == '_';
}

void skip_ws(Cursor& c) {
  while (is_requirement_ws(c.peek())) ++c.p;
}

// extras = "[" WS? (IDENTIFIER (WS? "," WS? IDENTIFIER)*)? WS? "]" WS?
bool take_extras(Cursor& c) {
  if (c.peek() != '[') return true;
  ++c.p;
  skip_ws(c);
  if (is_ascii_alnum(c.peek())) {
    do {
      skip_ws(c);
      if (!take_identifier(c)) return false;
      skip_ws(c);
    } while (c.peek() == ',' && (++c.p, true));
  }
  if (c.peek() != ']') return false;
  ++c.p;
  skip_ws(c);
  return true;
}

// packaging's SPECIFIER_LIST token: printable ASCII but ';' and ')', and tabs, up to ';', ')' or
// the end; a set without blank parts but perhaps the last.
bool take_specifier_list(Cursor& c) {
  std::size_t start = c.p;
  while (c.peek() == '\t' ||
         (c.peek() >= 0x20 && c.peek() <= 0x7e && c.peek() != ';' && c.peek() != ')'))
    ++c.p;
  std::string_view list = c.t.substr(start, c.p - start);
  if (!(c.done() || c.peek() == ';' || c.peek() == ')') || list.empty()) {
    c.p = start;
    return false;
  }
  auto parts = split(list, ",", /*skip_empty=*/false);
  bool any = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (is_blank(parts[i]) && !(i + 1 == parts.size() && any)) {
      c.p = start;
      return false;
    }
    any = any || !is_blank(parts[i]);
    if (!is_blank(parts[i]) && !is_valid_specifier(parts[i])) {
      c.p = start;
      return false;
    }
  }
  return true;
}

// Specifiers one token at a time (what packaging falls back to when the list is not one token:
// a non-ASCII or control character in it): OP VERSION, WS? "," WS? between them.
void take_specifiers(Cursor& c) {
  while (true) {
    std::size_t start = c.p;
    std::size_t end = c.t.size();
    // The longest specifier at the cursor: up to the next character no specifier has.
    for (std::size_t i = start; i < c.t.size(); ++i)
      if (c.t[i] == ',' || c.t[i] == ';' || c.t[i] == ')' || is_requirement_ws(c.t[i])) {
        end = i;
        break;
      }
    if (c.t.substr(start, 3) == "===") {
      std::size_t i = start + 3;
      while (i < c.t.size() && is_py_space(c.t[i])) ++i;
      end = i;
      while (end < c.t.size() && !is_py_space(c.t[end]) && c.t[end] != ';' && c.t[end] != ')')
        ++end;
    }
    if (start == end || !is_valid_specifier(c.t.substr(start, end - start))) return;
    c.p = end;
    skip_ws(c);
    if (c.peek() != ',') return;
    ++c.p;
    skip_ws(c);
  }
}

}  // namespace

// packaging's Requirement: WS? NAME WS? extras (@ URL (WS (; marker)?)? | specifiers WS?
// (; marker)?), specifiers "(" WS? list ")" WS? or a list. A requirement becomes a line of
// METADATA, so kiln also refuses control characters but the tab.
bool is_valid_requirement(std::string_view requirement) {
  std::string untabbed(requirement);
  std::replace(untabbed.begin(), untabbed.end(), '\t', ' ');
  if (!control_character(untabbed).empty()) return false;
  Cursor c{requirement};
  skip_ws(c);
  if (!take_identifier(c)) return false;
  skip_ws(c);
  if (!take_extras(c)) return false;
  if (c.peek() == '@') {
    ++c.p;
    skip_ws(c);
    std::size_t start = c.p;
    while (!c.done() && !is_py_space(c.peek())) ++c.p;
    if (c.p == start) return false;
    if (c.done()) return true;
    if (!is_requirement_ws(c.peek())) return false;
    skip_ws(c);
    if (c.done()) return true;
  } else {
    bool paren = c.peek() == '(';
    if (paren) {
      ++c.p;
      skip_ws(c);
    }
    if (!c.done() && !take_specifier_list(c)) take_specifiers(c);
    if (paren) {
      if (c.peek() != ')') return false;
      ++c.p;
      skip_ws(c);
    }
    if (c.done()) return true;
  }
  if (c.peek() != ';') return false;
  return is_valid_marker(c.t.substr(c.p + 1));
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
