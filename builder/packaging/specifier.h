// Version specifiers: packaging's verdict on a specifier set as METADATA writes one
// (is_valid_specifier_set), and requirements as pip reads them on the command line: NAME,
// NAME==VERSION, NAME>=A,<B, ~=, !=, <, >, <=, >=, === (matched as packaging 26 matches them),
// with extras, a parenthesised specifier list and a marker.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "packaging/version.h"

namespace kiln::packaging {

struct Specifier {
  std::string op;         // "==", "!=", "~=", "<", ">", "<=", ">=", "==="
  std::string text;       // the version as written ("1.7.*" without the ".*" in `version`)
  bool wildcard = false;  // "==1.7.*", "!=1.7.*"
  Version version;        // unset for "==="

  // Whether `candidate` (its text, for "===") satisfies this specifier, pre-releases allowed.
  bool matches(const Version& candidate, std::string_view candidate_text) const;
  // Whether the specifier names a pre-release (which lets the set select pre-releases).
  bool names_prerelease() const;
  std::string str() const { return op + text; }
};

// As packaging's SpecifierSet() takes them (non-canonical versions too), but not blank.
bool is_valid_specifier_set(std::string_view specifiers);  // ">=3.9", ">=3.9,<4"
// One specifier as packaging's Specifier() takes it, white space around it.
bool is_valid_specifier(std::string_view specifier);

struct Requirement;
class SpecifierSet;
Expected<Requirement> parse_requirement(std::string_view text);

class SpecifierSet {
 public:
  // "" (any version) or comma-separated specifiers; an error names the bad one.
  static Expected<SpecifierSet> parse(std::string_view text);

  const std::vector<Specifier>& specifiers() const { return specs_; }
  bool empty() const { return specs_.empty(); }
  // What packaging's SpecifierSet(text).filter(versions) keeps (prereleases=None): the versions
  // every specifier matches; pre-releases only when a specifier names one, or when no final
  // release matches. `versions` must each parse as PEP 440; those that do not are left out.
  std::vector<std::string> filter(const std::vector<std::string>& versions) const;
  // The local labels the set's "==" and "!=" specifiers name ("cu130torch2.11"), each once.
  std::vector<std::string> local_labels() const;
  // The same set with those labels taken off (for matching versions that carry none).
  SpecifierSet without_local_labels() const;
  std::string str() const;

 private:
  friend Expected<Requirement> parse_requirement(std::string_view text);
  std::vector<Specifier> specs_;
};

// A package argument as pip reads one (PEP 508 but a URL): "causal-conv1d",
// "causal-conv1d==1.7", "causal-conv1d>=1.6,<1.7", "causal-conv1d[dev]", "causal-conv1d (>=1.6)",
// "causal-conv1d; python_version >= '3.12'".
struct Requirement {
  std::string name;                 // as written
  std::string normalized;           // PEP 503
  std::vector<std::string> extras;  // normalised, as written in order
  SpecifierSet specifiers;
  std::string marker;  // after ';', trimmed; "" when none (checked: packaging/marker.h)
  std::string text;    // the argument
};

// Errors are BadInput and name the argument.
Expected<Requirement> parse_requirement(std::string_view text);

}  // namespace kiln::packaging
