#include "manifest/requirement.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "packaging/marker.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"

namespace kiln::manifest {

using packaging::is_py_space;
using packaging::is_valid_marker;
using packaging::is_valid_specifier;

namespace {

// A cursor over a requirement.
struct Cursor {
  std::string_view t;
  std::size_t p = 0;
  char peek(std::size_t ahead = 0) const { return p + ahead < t.size() ? t[p + ahead] : '\0'; }
  bool done() const { return p == t.size(); }
};

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_py_space);
}

bool is_name_char(char c) {
  return is_ascii_alnum(c) || c == '.' || c == '_' || c == '-';
}

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
  return packaging::normalize_name(t.substr(0, end));
}

}  // namespace kiln::manifest
