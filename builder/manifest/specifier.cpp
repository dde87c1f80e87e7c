#include "manifest/specifier.h"

#include <algorithm>
#include <limits>

#include "core/strings.h"
#include "manifest/limits.h"
#include "manifest/version.h"

namespace kiln::manifest {

namespace {

std::string_view trim_leading_zeros(std::string_view digits) {
  while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
  return digits;
}

bool is_separator(char c) {
  return c == '.' || c == '-' || c == '_';
}

// A run of digits as a number; false when empty or too long to be one.
bool take_number(Scanner& s, std::int64_t& out) {
  std::string_view digits = s.take_while(is_ascii_digit);
  if (digits.empty() || digits.size() > 18) return false;
  out = 0;
  for (char c : digits) out = out * 10 + (c - '0');
  return true;
}

// After an optional separator, one of `words` (the text is lower case); returns its index or -1,
// consuming nothing when none follows.
int take_word(Scanner& s, const std::vector<std::string_view>& words, bool separator_first) {
  Scanner probe = s;
  if (separator_first && is_separator(probe.peek())) probe.skip(probe.peek());
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!probe.at(words[i])) continue;
    probe.skip(words[i]);
    s = probe;  // the longer of two words with one prefix comes first ("preview", "pre")
    return static_cast<int>(i);
  }
  return -1;
}

// The number after a pre/post/dev word: [-_.]?N, 0 when absent.
bool take_implicit_number(Scanner& s, std::int64_t& out) {
  out = 0;
  Scanner probe = s;
  if (is_separator(probe.peek())) probe.skip(probe.peek());
  if (!is_ascii_digit(probe.peek())) return true;
  s = probe;
  return take_number(s, out);
}

bool parse_local(Scanner& s, std::string& out) {
  out.clear();
  do {
    std::string_view part = s.take_while(is_ascii_alnum);
    if (part.empty()) return false;
    if (!out.empty()) out += '.';
    out += part;
  } while (!s.done() && is_separator(s.peek()) && s.skip(s.peek()));
  return s.done();
}

// Release segments compared as if padded with zeros.
int compare_release(const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
  for (std::size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
    std::int64_t x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// PEP 440: local segments compare numerically when both are numbers, a number after a word;
// a shorter label that is a prefix of a longer one sorts first.
int compare_local(const std::string& a, const std::string& b) {
  if (a == b) return 0;
  if (a.empty() || b.empty()) return a.empty() ? -1 : 1;
  auto pa = split(a, "."), pb = split(b, ".");
  for (std::size_t i = 0; i < std::min(pa.size(), pb.size()); ++i) {
    bool na = std::all_of(pa[i].begin(), pa[i].end(), is_ascii_digit);
    bool nb = std::all_of(pb[i].begin(), pb[i].end(), is_ascii_digit);
    if (na != nb) return na ? 1 : -1;
    if (na) {
      std::string x(trim_leading_zeros(pa[i])), y(trim_leading_zeros(pb[i]));
      if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
      if (x != y) return x < y ? -1 : 1;
    } else if (pa[i] != pb[i]) {
      return pa[i] < pb[i] ? -1 : 1;
    }
  }
  return pa.size() < pb.size() ? -1 : pa.size() > pb.size() ? 1 : 0;
}

template <class T>
int compare_values(T a, T b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

}  // namespace

bool parse_pep440(std::string_view text, Pep440Version& out) {
  out = Pep440Version{};
  std::string lowered = lower(trim(text));
  Scanner s(lowered);
  s.skip('v');
  std::int64_t n = 0;
  if (!take_number(s, n)) return false;
  if (s.skip('!')) {
    out.epoch = n;
    if (!take_number(s, n)) return false;
  }
  out.release.push_back(n);
  while (s.peek() == '.' && is_ascii_digit(s.peek(1))) {
    s.skip('.');
    if (!take_number(s, n)) return false;
    out.release.push_back(n);
  }
  static const std::vector<std::string_view> pre_words = {"alpha", "beta", "preview", "pre",
                                                          "rc",    "a",    "b",       "c"};
  static const int pre_kinds[] = {0, 1, 2, 2, 2, 0, 1, 2};
  if (int w = take_word(s, pre_words, true); w >= 0) {
    out.pre_kind = pre_kinds[w];
    if (!take_implicit_number(s, out.pre)) return false;
  }
  if (s.peek() == '-' && is_ascii_digit(s.peek(1))) {  // "1.0-1": an implicit post-release
    s.skip('-');
    if (!take_number(s, out.post)) return false;
  } else if (take_word(s, {"post", "rev", "r"}, true) >= 0) {
    if (!take_implicit_number(s, out.post)) return false;
  }
  if (take_word(s, {"dev"}, true) >= 0) {
    if (!take_implicit_number(s, out.dev)) return false;
  }
  if (s.skip('+')) return parse_local(s, out.local);
  return s.done();
}

std::string Pep440Version::str() const {
  std::string out = epoch ? cat(epoch, "!") : std::string();
  for (std::size_t i = 0; i < release.size(); ++i) out += cat(i ? "." : "", release[i]);
  if (pre_kind >= 0) out += cat(pre_kind == 0 ? "a" : pre_kind == 1 ? "b" : "rc", pre);
  if (post >= 0) out += cat(".post", post);
  if (dev >= 0) out += cat(".dev", dev);
  if (!local.empty()) out += cat("+", local);
  return out;
}

Pep440Version Pep440Version::public_version() const {
  Pep440Version v = *this;
  v.local.clear();
  return v;
}

int compare_pep440(const Pep440Version& a, const Pep440Version& b) {
  if (int c = compare_values(a.epoch, b.epoch)) return c;
  if (int c = compare_release(a.release, b.release)) return c;
  // Pre-release: a dev release of no pre- or post-release sorts before every pre-release; a
  // version with no pre-release after them all.
  auto pre_key = [](const Pep440Version& v) {
    if (v.pre_kind < 0 && v.post < 0 && v.dev >= 0) return std::make_pair(-1, std::int64_t(0));
    if (v.pre_kind < 0) return std::make_pair(3, std::int64_t(0));
    return std::make_pair(v.pre_kind, v.pre);
  };
  if (int c = compare_values(pre_key(a), pre_key(b))) return c;
  if (int c = compare_values(a.post, b.post)) return c;  // none (-1) first
  auto dev_key = [](const Pep440Version& v) {
    return v.dev < 0 ? std::numeric_limits<std::int64_t>::max() : v.dev;
  };
  if (int c = compare_values(dev_key(a), dev_key(b))) return c;
  return compare_local(a.local, b.local);
}

namespace {

// epoch and release equal, the rest ignored.
bool same_base(const Pep440Version& a, const Pep440Version& b) {
  return a.epoch == b.epoch && compare_release(a.release, b.release) == 0;
}

// "==PREFIX.*": the candidate's release, padded with zeros, starts with the prefix.
bool prefix_match(const Pep440Version& candidate, const Pep440Version& prefix) {
  if (candidate.epoch != prefix.epoch) return false;
  for (std::size_t i = 0; i < prefix.release.size(); ++i) {
    std::int64_t c = i < candidate.release.size() ? candidate.release[i] : 0;
    if (c != prefix.release[i]) return false;
  }
  return true;
}

bool equal_match(const Specifier& spec, const Pep440Version& candidate) {
  if (spec.wildcard) return prefix_match(candidate, spec.version);
  const Pep440Version& c = spec.version.local.empty() ? candidate.public_version() : candidate;
  return compare_pep440(c, spec.version) == 0;
}

}  // namespace

bool Specifier::matches(const Pep440Version& candidate, std::string_view candidate_text) const {
  const Pep440Version& v = version;
  if (op == "===") return lower(trim(candidate_text)) == lower(text);
  if (op == "==") return equal_match(*this, candidate);
  if (op == "!=") return !equal_match(*this, candidate);
  Pep440Version pub = candidate.public_version();
  if (op == "<=") return compare_pep440(pub, v) <= 0;
  if (op == ">=") return compare_pep440(pub, v) >= 0;
  if (op == "<") {
    if (compare_pep440(candidate, v) >= 0) return false;
    return v.is_prerelease() || !candidate.is_prerelease() || !same_base(candidate, v);
  }
  if (op == ">") {
    if (compare_pep440(candidate, v) <= 0) return false;
    if (!v.is_postrelease() && candidate.is_postrelease() && same_base(candidate, v)) return false;
    return candidate.local.empty() || !same_base(candidate, v);
  }
  // "~=V": >=V and ==(V's release without its last part).*
  if (compare_pep440(pub, v) < 0) return false;
  Pep440Version prefix;
  prefix.epoch = v.epoch;
  prefix.release.assign(v.release.begin(), v.release.end() - 1);
  return prefix_match(candidate, prefix);
}

bool Specifier::names_prerelease() const {
  if (op == "!=" || op == "===" || wildcard) return false;
  return version.is_prerelease();
}

namespace {

// The reason alone: the caller names what it parsed (a specifier set, a package argument).
Error bad_specifier(std::string_view spec, std::string_view why) {
  (void)spec;
  return Error::bad_input(std::string(why));
}

Expected<Specifier> parse_specifier(std::string_view text) {
  std::string_view t = trim(text);
  Specifier spec;
  for (std::string_view op : {"===", "==", "!=", "~=", "<=", ">=", "<", ">"}) {
    if (t.substr(0, op.size()) == op) {
      spec.op = std::string(op);
      break;
    }
  }
  if (spec.op.empty())
    return bad_specifier(t, "expected an operator (==, !=, ~=, <, >, <=, >=, ===) and a version");
  std::string_view rest = trim(t.substr(spec.op.size()));
  if (rest.empty()) return bad_specifier(t, "no version after the operator");
  if (rest.size() > kMaxVersionBytes)
    return bad_specifier(t, cat("the version is longer than ", kMaxVersionBytes, " bytes"));
  if (!control_character(rest).empty() || rest.find(' ') != std::string_view::npos)
    return bad_specifier(t, "a version has no spaces or control characters");
  spec.text = std::string(rest);
  if (spec.op == "===") return spec;
  if (rest.size() > 2 && rest.substr(rest.size() - 2) == ".*") {
    if (spec.op != "==" && spec.op != "!=")
      return bad_specifier(t, cat("'.*' goes only with == and != (", spec.op, " takes a version)"));
    spec.wildcard = true;
    rest.remove_suffix(2);
  }
  if (!parse_pep440(rest, spec.version))
    return bad_specifier(t, cat("'", rest, "' is not a PEP 440 version"));
  const Pep440Version& v = spec.version;
  if (spec.wildcard && (v.pre_kind >= 0 || v.post >= 0 || v.dev >= 0 || !v.local.empty()))
    return bad_specifier(t, "a prefix ('.*') is release numbers only, e.g. ==1.7.*");
  if (!v.local.empty() && spec.op != "==" && spec.op != "!=")
    return bad_specifier(t, cat("a local label (+", v.local, ") goes only with == and !="));
  if (spec.op == "~=" && v.release.size() < 2)
    return bad_specifier(t, "~= needs at least two release numbers, e.g. ~=1.6 or ~=1.6.0");
  spec.text = cat(v.str(), spec.wildcard ? ".*" : "");
  return spec;
}

// The specifiers of `text`; an error gives the reason, and which specifier when there are several.
Expected<std::vector<Specifier>> parse_specifiers(std::string_view text) {
  std::vector<Specifier> out;
  if (trim(text).empty()) return out;
  auto parts = split(text, ",", /*skip_empty=*/false);
  for (const auto& part : parts) {
    auto spec = parse_specifier(part);
    if (!spec && parts.size() == 1) return std::move(spec).error();
    if (!spec)
      return Error::bad_input(cat("'", printable_excerpt(trim(part)), "': ", spec.error().message));
    out.push_back(std::move(*spec));
  }
  return out;
}

}  // namespace

Expected<SpecifierSet> SpecifierSet::parse(std::string_view text) {
  auto specs = parse_specifiers(text);
  if (!specs)
    return Error::bad_input(
        cat("bad version specifier '", printable_excerpt(text), "': ", specs.error().message));
  SpecifierSet set;
  set.specs_ = std::move(*specs);
  return set;
}

std::vector<std::string> SpecifierSet::filter(const std::vector<std::string>& versions) const {
  bool prereleases = std::any_of(specs_.begin(), specs_.end(),
                                 [](const Specifier& s) { return s.names_prerelease(); });
  std::vector<std::string> finals, pres;
  for (const auto& text : versions) {
    Pep440Version v;
    if (!parse_pep440(text, v)) continue;
    bool ok = std::all_of(specs_.begin(), specs_.end(),
                          [&](const Specifier& s) { return s.matches(v, text); });
    if (!ok) continue;
    (v.is_prerelease() && !prereleases ? pres : finals).push_back(text);
  }
  return finals.empty() ? pres : finals;
}

std::vector<std::string> SpecifierSet::local_labels() const {
  std::vector<std::string> out;
  for (const auto& s : specs_)
    if (s.op != "===" && !s.version.local.empty() &&
        std::find(out.begin(), out.end(), s.version.local) == out.end())
      out.push_back(s.version.local);
  return out;
}

SpecifierSet SpecifierSet::without_local_labels() const {
  SpecifierSet out = *this;
  for (auto& s : out.specs_) {
    if (s.op == "===" || s.version.local.empty()) continue;
    s.version.local.clear();
    s.text = s.version.str();
  }
  return out;
}

std::string SpecifierSet::str() const {
  std::vector<std::string> parts;
  for (const auto& s : specs_) parts.push_back(s.str());
  return join(parts, ",");
}

Expected<Requirement> parse_requirement(std::string_view text) {
  Requirement r;
  r.text = std::string(text);
  Scanner s(trim(text));
  r.name = std::string(s.take_while([](char c) { return is_ascii_alnum(c) || is_separator(c); }));
  std::string_view rest = trim(s.rest());
  auto bad = [&](std::string_view why) {
    return Error::bad_input(cat("bad package spec '", printable_excerpt(text), "': ", why));
  };
  if (r.name.size() > kMaxNameBytes)
    return bad(cat("the name is longer than ", kMaxNameBytes, " bytes"));
  if (!is_valid_project_name(r.name) ||
      (!rest.empty() && std::string_view("=!~<>").find(rest[0]) == std::string_view::npos))
    return bad(
        "expected NAME, NAME==VERSION or NAME with version specifiers, e.g. 'NAME>=1.6,<1.7'");
  auto specs = parse_specifiers(rest);
  if (!specs) return bad(specs.error().message);
  r.specifiers.specs_ = std::move(*specs);
  r.normalized = normalize_name(r.name);
  return r;
}

}  // namespace kiln::manifest
