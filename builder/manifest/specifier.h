// Requirements as pip reads them on the command line: NAME, NAME==VERSION, NAME>=A,<B, ~=, !=, <,
// >, <=, >=, === (PEP 440 version specifiers, matched as packaging 26 matches them).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::manifest {

// A PEP 440 version in any valid spelling ("v1.7-RC1", "1.7.0.post2.dev1+Cu130"), parsed and
// normalised.
struct Pep440Version {
  std::int64_t epoch = 0;
  std::vector<std::int64_t> release;
  int pre_kind = -1;  // -1: none; 0: a, 1: b, 2: rc
  std::int64_t pre = 0;
  std::int64_t post = -1;  // -1: none
  std::int64_t dev = -1;   // -1: none
  std::string local;       // normalised ("cu130torch2.11"), empty when none

  bool is_prerelease() const { return pre_kind >= 0 || dev >= 0; }
  bool is_postrelease() const { return post >= 0; }
  // The normalised text ("1.7.0rc1+cu130torch2.11").
  std::string str() const;
  // The same version without its local label.
  Pep440Version public_version() const;
};

// Parses any valid PEP 440 spelling; false on anything else.
bool parse_pep440(std::string_view text, Pep440Version& out);
// PEP 440 ordering, local labels included; < 0, 0, > 0.
int compare_pep440(const Pep440Version& a, const Pep440Version& b);

struct Specifier {
  std::string op;         // "==", "!=", "~=", "<", ">", "<=", ">=", "==="
  std::string text;       // the version as written ("1.7.*" without the ".*" in `version`)
  bool wildcard = false;  // "==1.7.*", "!=1.7.*"
  Pep440Version version;  // unset for "==="

  // Whether `candidate` (its text, for "===") satisfies this specifier, pre-releases allowed.
  bool matches(const Pep440Version& candidate, std::string_view candidate_text) const;
  // Whether the specifier names a pre-release (which lets the set select pre-releases).
  bool names_prerelease() const;
  std::string str() const { return op + text; }
};

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

// A package argument: "causal-conv1d", "causal-conv1d==1.7", "causal-conv1d>=1.6,<1.7".
struct Requirement {
  std::string name;        // as written
  std::string normalized;  // PEP 503
  SpecifierSet specifiers;
  std::string text;  // the argument
};

// Errors are BadInput and name the argument.
Expected<Requirement> parse_requirement(std::string_view text);

}  // namespace kiln::manifest
