// A PEP 508 marker checked the way packaging 26's hand-written parser (_parser.py) reads one, its
// tokens (_tokenizer.py's regular expressions) matched in one forward pass. Python's \b is a
// boundary between a word character ([A-Za-z0-9_] or, taken here for every byte >= 0x80, a
// non-ASCII letter) and anything else.
#include "manifest/marker.h"

#include <array>
#include <cstddef>
#include <string_view>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

constexpr int kMaxNesting = 200;  // packaging's _MAX_MARKER_NESTING

bool is_word(char c) {
  return is_ascii_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

bool is_hex_digit(char c) {
  return is_ascii_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// The variables packaging's VARIABLE token knows (os.name, sys.platform, platform.version,
// platform.machine and platform.python_implementation also with a dot; python_implementation is
// the legacy name), longest first where one is a prefix of another.
constexpr std::array<std::string_view, 20> kVariables = {
    "python_version",
    "python_full_version",
    "os_name",
    "os.name",
    "sys_platform",
    "sys.platform",
    "platform_release",
    "platform_system",
    "platform_version",
    "platform.version",
    "platform_machine",
    "platform.machine",
    "platform_python_implementation",
    "platform.python_implementation",
    "python_implementation",
    "implementation_name",
    "implementation_version",
    "extras",
    "extra",
    "dependency_groups",
};

// A Python string literal's body between its quotes, as ast.literal_eval takes it: no NUL, no
// line break but one escaped by a backslash, and each escape complete (\xHH, \uHHHH, \UHHHHHHHH
// up to U+10FFFF; \N{...} is refused: the name is not checked here).
bool is_python_string_body(std::string_view body) {
  for (std::size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (c == '\0' || c == '\n' || c == '\r') return false;
    if (c != '\\') continue;
    if (++i == body.size()) return false;  // escapes the closing quote
    char e = body[i];
    std::size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (e == 'N') return false;
    if (e == '\r' && i + 1 < body.size() && body[i + 1] == '\n') ++i;
    if (hex == 0) continue;
    if (body.size() - i - 1 < hex) return false;
    for (std::size_t k = 1; k <= hex; ++k)
      if (!is_hex_digit(body[i + k])) return false;
    if (e == 'U' && (body.substr(i + 1, 2) != "00" || body.substr(i + 3, 2) > "10")) return false;
    i += hex;
  }
  return true;
}

class MarkerParser {
 public:
  explicit MarkerParser(std::string_view text) : t_(text) {}

  bool parse() { return marker(0) && p_ == t_.size(); }

 private:
  char at(std::size_t i) const { return i < t_.size() ? t_[i] : '\0'; }
  bool word_before() const { return p_ > 0 && is_word(t_[p_ - 1]); }
  // \b<word>\b at the cursor.
  bool keyword(std::string_view w) const {
    if (t_.substr(p_, w.size()) != w) return false;
    return !word_before() && is_word(w[0]) &&
           !(p_ + w.size() < t_.size() && is_word(t_[p_ + w.size()]));
  }
  void ws() {
    while (at(p_) == ' ' || at(p_) == '\t') ++p_;
  }

  // marker = atom (BOOLOP atom)*
  bool marker(int depth) {
    if (!atom(depth)) return false;
    while (keyword("and") || keyword("or")) {
      p_ += at(p_) == 'a' ? 3 : 2;
      if (!atom(depth)) return false;
    }
    return true;
  }

  // atom = WS? ( "(" marker ")" | item ) WS?
  bool atom(int depth) {
    ws();
    if (at(p_) == '(') {
      if (depth >= kMaxNesting) return false;
      ++p_;
      if (!marker(depth + 1) || at(p_) != ')') return false;
      ++p_;
    } else if (!item()) {
      return false;
    }
    ws();
    return true;
  }

  // item = var WS? op WS? var
  bool item() {
    if (!var()) return false;
    ws();
    if (!op()) return false;
    ws();
    return var();
  }

  bool var() {
    if (!word_before()) {
      for (std::string_view v : kVariables) {
        if (t_.substr(p_, v.size()) == v &&
            !(p_ + v.size() < t_.size() && is_word(t_[p_ + v.size()]))) {
          p_ += v.size();
          return true;
        }
      }
    }
    char q = at(p_);
    if (q != '\'' && q != '"') return false;
    std::size_t end = t_.find(q, p_ + 1);
    if (end == std::string_view::npos) return false;
    std::string_view body = t_.substr(p_ + 1, end - p_ - 1);
    p_ = end + 1;
    return is_python_string_body(body);
  }

  // IN | NOT WS IN | one of === == ~= != <= >= < >
  bool op() {
    if (keyword("in")) {
      p_ += 2;
      return true;
    }
    if (keyword("not")) {
      p_ += 3;
      std::size_t before = p_;
      ws();
      if (p_ == before || !keyword("in")) return false;
      p_ += 2;
      return true;
    }
    for (std::string_view o : {"===", "==", "~=", "!=", "<=", ">=", "<", ">"}) {
      if (t_.substr(p_, o.size()) == o) {
        p_ += o.size();
        return true;
      }
    }
    return false;
  }

  std::string_view t_;
  std::size_t p_ = 0;
};

}  // namespace

bool is_valid_marker(std::string_view marker) {
  return MarkerParser(marker).parse();
}

}  // namespace kiln::manifest
