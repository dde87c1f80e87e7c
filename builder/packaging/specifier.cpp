#include "packaging/specifier.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"
#include "packaging/limits.h"
#include "packaging/marker.h"
#include "packaging/name.h"

namespace kiln::packaging {

namespace {

bool is_separator(char c) {
  return c == '.' || c == '-' || c == '_';
}

bool is_blank(std::string_view text) {
  return std::all_of(text.begin(), text.end(), is_py_space);
}

bool skip_ci(std::string_view text, std::size_t& p, std::string_view word) {
  if (text.size() - p < word.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[p + i])) != word[i]) return false;
  p += word.size();
  return true;
}

}  // namespace

// One specifier as packaging's Specifier takes it (the whole text, white space around it):
// === and anything but white space, ';' and ')'; ==/!= VERSION[.*|+local]; ~= VERSION with two
// release numbers; <= >= < > VERSION.
bool is_valid_specifier(std::string_view t) {
  std::size_t p = 0;
  auto spaces = [&] {
    while (p < t.size() && is_py_space(t[p])) ++p;
  };
  spaces();
  if (skip_ci(t, p, "===")) {
    spaces();
    std::size_t start = p;
    while (p < t.size() && !is_py_space(t[p]) && t[p] != ';' && t[p] != ')') ++p;
    if (p == start) return false;
  } else {
    VersionForm form;
    if (skip_ci(t, p, "==") || skip_ci(t, p, "!="))
      form = VersionForm::Equality;
    else if (skip_ci(t, p, "~="))
      form = VersionForm::Compatible;
    else if (skip_ci(t, p, "<=") || skip_ci(t, p, ">=") || skip_ci(t, p, "<") || skip_ci(t, p, ">"))
      form = VersionForm::Ordered;
    else
      return false;
    spaces();
    std::size_t taken = match_version(t.substr(p), form, nullptr);
    if (taken == 0) return false;
    p += taken;
  }
  spaces();
  return p == t.size();
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

// The version's epoch and release alone.
Version base(const Version& v) {
  return v.release_prefix(v.release().size());
}

// epoch and release equal, the rest ignored.
bool same_base(const Version& a, const Version& b) {
  return compare(base(a), base(b)) == 0;
}

// "==PREFIX.*": the candidate's release, padded with zeros, starts with the prefix.
bool prefix_match(const Version& candidate, const Version& prefix) {
  return candidate.epoch() == prefix.epoch() &&
         candidate.release_prefix(prefix.release().size()).release() == prefix.release();
}

bool equal_match(const Specifier& spec, const Version& candidate) {
  if (spec.wildcard) return prefix_match(candidate, spec.version);
  return compare(spec.version.has_local() ? candidate : candidate.public_version(), spec.version) ==
         0;
}

}  // namespace

bool Specifier::matches(const Version& candidate, std::string_view candidate_text) const {
  const Version& v = version;
  if (op == "===") return lower(trim(candidate_text)) == lower(text);
  if (op == "==") return equal_match(*this, candidate);
  if (op == "!=") return !equal_match(*this, candidate);
  Version pub = candidate.public_version();
  if (op == "<=") return compare(pub, v) <= 0;
  if (op == ">=") return compare(pub, v) >= 0;
  if (op == "<") {
    if (compare(candidate, v) >= 0) return false;
    return v.is_prerelease() || !candidate.is_prerelease() || !same_base(candidate, v);
  }
  if (op == ">") {
    if (compare(candidate, v) <= 0) return false;
    if (!v.is_postrelease() && candidate.is_postrelease() && same_base(candidate, v)) return false;
    return !candidate.has_local() || !same_base(candidate, v);
  }
  // "~=V": >=V and ==(V's release without its last part).*
  if (compare(pub, v) < 0) return false;
  return prefix_match(candidate, v.release_prefix(v.release().size() - 1));
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
  auto parsed = Version::parse(rest);
  if (!parsed) return bad_specifier(t, cat("'", rest, "' is not a PEP 440 version"));
  spec.version = std::move(*parsed);
  const Version& v = spec.version;
  if (spec.wildcard && (!v.is_plain_release() || v.has_local()))
    return bad_specifier(t, "a prefix ('.*') is release numbers only, e.g. ==1.7.*");
  if (v.has_local() && spec.op != "==" && spec.op != "!=")
    return bad_specifier(t, cat("a local label (+", v.local(), ") goes only with == and !="));
  if (spec.op == "~=" && v.release().size() < 2)
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
    auto v = Version::parse(text);
    if (!v) continue;
    bool ok = std::all_of(specs_.begin(), specs_.end(),
                          [&](const Specifier& s) { return s.matches(*v, text); });
    if (!ok) continue;
    (v->is_prerelease() && !prereleases ? pres : finals).push_back(text);
  }
  return finals.empty() ? pres : finals;
}

std::vector<std::string> SpecifierSet::local_labels() const {
  std::vector<std::string> out;
  for (const auto& s : specs_)
    if (s.op != "===" && s.version.has_local() &&
        std::find(out.begin(), out.end(), s.version.local()) == out.end())
      out.push_back(s.version.local());
  return out;
}

SpecifierSet SpecifierSet::without_local_labels() const {
  SpecifierSet out = *this;
  for (auto& s : out.specs_) {
    if (s.op == "===" || !s.version.has_local()) continue;
    s.version.drop_local();
    s.text = s.version.str();
  }
  return out;
}

std::string SpecifierSet::str() const {
  std::vector<std::string> parts;
  for (const auto& s : specs_) parts.push_back(s.str());
  return join(parts, ",");
}

namespace {

// "[a, b]" after the name: each extra a valid name, normalised; "" names none.
Expected<std::vector<std::string>> take_extras(Scanner& s) {
  std::vector<std::string> extras;
  if (!s.skip('[')) return extras;
  s.skip_spaces();
  if (s.skip(']')) return extras;
  while (true) {
    s.skip_spaces();
    std::string_view extra =
        s.take_while([](char c) { return is_ascii_alnum(c) || is_separator(c); });
    if (!is_valid_project_name(extra))
      return Error::bad_input("an extra in [...] is not a name (letters, digits, '.', '_', '-')");
    extras.push_back(normalize_name(extra));
    s.skip_spaces();
    if (s.skip(']')) return extras;
    if (!s.skip(','))
      return Error::bad_input("the extras are not a list like [a,b] (no closing ']'?)");
  }
}

}  // namespace

// NAME WS? ("[" extras "]")? WS? ("(" specifiers ")" | specifiers)? (";" marker)?: PEP 508 as pip
// reads a command-line requirement, but for a URL (kiln builds what its manifests name).
Expected<Requirement> parse_requirement(std::string_view text) {
  Requirement r;
  r.text = std::string(text);
  auto bad = [&](std::string_view why) {
    return Error::bad_input(cat("bad package spec '", printable_excerpt(text), "': ", why));
  };
  std::string_view body = trim(text);
  if (std::size_t semi = body.find(';'); semi != std::string_view::npos) {
    r.marker = std::string(trim(body.substr(semi + 1)));
    if (!is_valid_marker(r.marker))
      return bad("the marker after ';' is not PEP 508's, e.g. 'NAME; python_version >= \"3.12\"'");
    body = trim(body.substr(0, semi));
  }
  Scanner s(body);
  r.name = std::string(s.take_while([](char c) { return is_ascii_alnum(c) || is_separator(c); }));
  if (r.name.size() > kMaxNameBytes)
    return bad(cat("the name is longer than ", kMaxNameBytes, " bytes"));
  s.skip_spaces();
  auto extras = take_extras(s);
  if (!extras) return bad(extras.error().message);
  r.extras = std::move(*extras);
  std::string_view rest = trim(s.rest());
  if (rest.starts_with('@'))
    return bad("kiln builds what its manifests name, not a URL: give NAME or NAME==VERSION");
  if (rest.starts_with('(')) {
    if (!rest.ends_with(')')) return bad("no ')' closes the '(' of the version specifiers");
    rest = trim(rest.substr(1, rest.size() - 2));
  }
  if (!is_valid_project_name(r.name) ||
      (!rest.empty() && std::string_view("=!~<>").find(rest[0]) == std::string_view::npos))
    return bad(
        "expected a requirement as pip reads one: NAME, NAME==VERSION, 'NAME>=1.6,<1.7', "
        "'NAME[extra]', 'NAME (>=1.6)' or 'NAME; MARKER'");
  auto specs = parse_specifiers(rest);
  if (!specs) return bad(specs.error().message);
  r.specifiers.specs_ = std::move(*specs);
  r.normalized = normalize_name(r.name);
  return r;
}

}  // namespace kiln::packaging
