// A PEP 508 marker read the way packaging 26's hand-written parser (_parser.py) reads one, its
// tokens (_tokenizer.py's regular expressions) matched in one forward pass, and evaluated in the
// same pass as markers.py evaluates the tree. Python's \b is a boundary between a word character
// ([A-Za-z0-9_] or, taken here for every byte >= 0x80, a non-ASCII letter) and anything else.
#include "packaging/marker.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/strings.h"
#include "packaging/name.h"
#include "packaging/specifier.h"

namespace kiln::packaging {

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

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// The value of a string body is_python_string_body took, as ast.literal_eval gives it (an
// unknown escape keeps its backslash, as Python does).
std::string python_string_value(std::string_view body) {
  std::string out;
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 == body.size()) {
      out += body[i];
      continue;
    }
    char e = body[++i];
    std::size_t hex = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (hex > 0) {
      append_utf8(out, static_cast<std::uint32_t>(
                           std::stoul(std::string(body.substr(i + 1, hex)), nullptr, 16)));
      i += hex;
    } else if (e >= '0' && e <= '7') {
      std::uint32_t cp = 0;
      for (std::size_t k = 0; k < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7'; ++k)
        cp = cp * 8 + static_cast<std::uint32_t>(body[i++] - '0');
      --i;
      append_utf8(out, cp);
    } else {
      constexpr std::string_view kFrom = "\\'\"abfnrtv", kTo = "\\'\"\a\b\f\n\r\t\v";
      std::size_t at = kFrom.find(e);
      if (at == std::string_view::npos) out += '\\';
      out += at == std::string_view::npos ? e : kTo[at];
    }
  }
  return out;
}

// The variables Marker compares as versions where the operator and value make a specifier.
bool is_version_variable(std::string_view name) {
  return name == "python_version" || name == "python_full_version" ||
         name == "implementation_version" || name == "platform_release";
}

// packaging's process_env_var: "os.name" -> "os_name", "python_implementation" ->
// "platform_python_implementation".
std::string canonical_variable(std::string_view name) {
  std::string out(name);
  for (char& c : out)
    if (c == '.') c = '_';
  return out == "python_implementation" ? "platform_python_implementation" : out;
}

// One side of a comparison: a variable (its canonical name) or a string's value.
struct Operand {
  bool variable = false;
  std::string text;
};

class MarkerParser {
 public:
  // `environment` null: the marker is only checked.
  MarkerParser(std::string_view text, const MarkerEnvironment* environment)
      : t_(text), env_(environment) {}

  bool parse(bool& value) { return marker(0, value) && p_ == t_.size(); }
  // The first evaluation error ("" when none).
  const std::string& error() const { return error_; }

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

  // marker = atom (BOOLOP atom)*: true when any group of atoms joined by "and" is all true.
  bool marker(int depth, bool& value) {
    bool atom_value = false;
    if (!atom(depth, atom_value)) return false;
    bool any = false, all = atom_value;
    while (keyword("and") || keyword("or")) {
      bool is_or = at(p_) == 'o';
      p_ += is_or ? 2 : 3;
      if (is_or) {
        any = any || all;
        all = true;
      }
      if (!atom(depth, atom_value)) return false;
      all = all && atom_value;
    }
    value = any || all;
    return true;
  }

  // atom = WS? ( "(" marker ")" | item ) WS?
  bool atom(int depth, bool& value) {
    ws();
    if (at(p_) == '(') {
      if (depth >= kMaxNesting) return false;
      ++p_;
      if (!marker(depth + 1, value) || at(p_) != ')') return false;
      ++p_;
    } else if (!item(value)) {
      return false;
    }
    ws();
    return true;
  }

  // item = var WS? op WS? var
  bool item(bool& value) {
    Operand lhs, rhs;
    std::string op;
    if (!var(lhs)) return false;
    ws();
    if (!take_op(op)) return false;
    ws();
    if (!var(rhs)) return false;
    if (env_) value = evaluate(lhs, op, rhs);
    return true;
  }

  bool var(Operand& out) {
    if (!word_before()) {
      for (std::string_view v : kVariables) {
        if (t_.substr(p_, v.size()) == v &&
            !(p_ + v.size() < t_.size() && is_word(t_[p_ + v.size()]))) {
          p_ += v.size();
          out = {true, canonical_variable(v)};
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
    if (!is_python_string_body(body)) return false;
    out = {false, python_string_value(body)};
    return true;
  }

  // IN | NOT WS IN | one of === == ~= != <= >= < >
  bool take_op(std::string& out) {
    if (keyword("in")) {
      p_ += 2;
      out = "in";
      return true;
    }
    if (keyword("not")) {
      p_ += 3;
      std::size_t before = p_;
      ws();
      if (p_ == before || !keyword("in")) return false;
      p_ += 2;
      out = "not in";
      return true;
    }
    for (std::string_view o : {"===", "==", "~=", "!=", "<=", ">=", "<", ">"}) {
      if (t_.substr(p_, o.size()) == o) {
        p_ += o.size();
        out = std::string(o);
        return true;
      }
    }
    return false;
  }

  // markers.py's _evaluate_markers for one comparison: the variable's value from the
  // environment; the other side's text (a variable on the right of a string is looked up by the
  // string's value, as packaging does); an extra compared with a string normalised.
  bool evaluate(const Operand& lhs, const std::string& op, const Operand& rhs) {
    const std::string& key = lhs.variable ? lhs.text : rhs.text;
    auto found = env_->find(key);
    if (found == env_->end()) {
      fail(cat("it names ", key, ", whose value is not known here"));
      return false;
    }
    std::string l = lhs.variable ? found->second : lhs.text;
    std::string r = lhs.variable ? rhs.text : found->second;
    if (key == "extra" && lhs.variable && !rhs.variable) r = normalize_name(r);
    if (key == "extra" && !lhs.variable) l = normalize_name(l);
    return compare(l, op, r, key);
  }

  // markers.py's _eval_op and its _operators.
  bool compare(const std::string& l, const std::string& op, const std::string& r,
               const std::string& key) {
    if (is_version_variable(key) && op != "in" && op != "not in" && is_valid_specifier(op + r)) {
      auto set = SpecifierSet::parse(op + r);
      auto version = Version::parse(l);
      if (set && set->specifiers().size() == 1)
        return version && set->specifiers().front().matches(*version, l);
    }
    if (op == "in") return r.find(l) != std::string::npos;
    if (op == "not in") return r.find(l) == std::string::npos;
    // packaging 26 orders no text: < and > are false, <= and >= are ==.
    if (op == "==" || op == "<=" || op == ">=") return l == r;
    if (op == "!=") return l != r;
    if (op == "<" || op == ">") return false;
    fail(cat("it compares '", printable_excerpt(l), "' ", op, " '", printable_excerpt(r),
             "', which is undefined for text that is no version"));
    return false;
  }

  void fail(std::string why) {
    if (error_.empty()) error_ = std::move(why);
  }

  std::string_view t_;
  std::size_t p_ = 0;
  const MarkerEnvironment* env_;
  std::string error_;
};

}  // namespace

bool is_valid_marker(std::string_view marker) {
  bool value = false;
  return MarkerParser(marker, nullptr).parse(value);
}

Expected<bool> evaluate_marker(std::string_view marker, const MarkerEnvironment& environment) {
  MarkerParser parser(marker, &environment);
  bool value = false;
  if (!parser.parse(value))
    return Error::bad_input(cat("'", printable_excerpt(marker),
                                "' is not an environment marker as PEP 508 writes one"));
  if (!parser.error().empty())
    return Error::bad_input(
        cat("the marker '", printable_excerpt(marker), "' does not evaluate: ", parser.error()));
  return value;
}

}  // namespace kiln::packaging
