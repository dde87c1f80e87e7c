// PEP 440 versions as packaging 26.4 reads, prints and orders them: the one parser (every spelling
// packaging's Version() takes, and the forms its specifiers take), the canonical text and the one
// ordering (epochs, pre-, post- and dev releases, local labels). Numbers are kept as their digits,
// so no version is too large to read or to order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::packaging {

class Version {
 public:
  // Any spelling packaging's Version() takes ("v1.7-RC1", "1.0.POST", " 1.0+Cu130 "); none else.
  static std::optional<Version> parse(std::string_view text);

  // The canonical text, as packaging's str(Version) ("1.7rc1", "1.0.post0", "1.0+cu130").
  std::string str() const;
  // The same version without its local label.
  Version public_version() const;
  bool is_prerelease() const { return pre_kind_ >= 0 || !dev_.empty(); }
  bool is_postrelease() const { return !post_.empty(); }
  const std::string& local() const { return local_; }  // normalised, "" when none
  const std::vector<std::string>& release() const { return release_; }
  const std::string& epoch() const { return epoch_; }
  bool has_local() const { return !local_.empty(); }
  // Pre/post/dev parts or a local label: anything besides epoch and release.
  bool is_plain_release() const { return pre_kind_ < 0 && post_.empty() && dev_.empty(); }

  // The release's first `n` numbers (the prefix of "==1.7.*", "~=1.7.0").
  Version release_prefix(std::size_t n) const;
  void drop_local() { local_.clear(); }

  // PEP 440 ordering, local labels included; < 0, 0, > 0.
  friend int compare(const Version& a, const Version& b);
  friend bool operator<(const Version& a, const Version& b) { return compare(a, b) < 0; }
  friend bool operator==(const Version& a, const Version& b) { return compare(a, b) == 0; }

 private:
  friend struct VersionParser;
  std::string epoch_ = "0";
  std::vector<std::string> release_;  // each without leading zeros
  int pre_kind_ = -1;                 // -1: none; 0: a, 1: b, 2: rc
  std::string pre_;                   // the pre-release's number, when pre_kind_ >= 0
  std::string post_;                  // "": no post release
  std::string dev_;                   // "": no dev release
  std::string local_;
};

// Whether packaging's Version() takes `text`.
bool is_version(std::string_view text);
// A canonical public version ("1.0", "2!1.0rc1.post2.dev3"): what str(Version(text)) gives back
// unchanged, without a local label.
bool is_canonical_version(std::string_view text);
// Two texts in PEP 440 order; one that is no version sorts before every version, two such by
// text. < 0, 0, > 0.
int compare_versions(std::string_view a, std::string_view b);
bool version_less(std::string_view a, std::string_view b);

// Where a version stands in packaging's specifier grammar, for the one parser: a version alone
// (Version()), after == or != (a trailing .* or a local label), after ~= (two release numbers at
// least, no local label), after <= >= < > (no local label).
enum class VersionForm { Plain, Equality, Compatible, Ordered };

// The version of `form` at the start of `text`, taken as packaging's pattern takes it (each part
// possessively); `out` (may be null) receives it. Returns the bytes taken, 0 when none.
// `wildcard` is set when an Equality form ended with ".*".
std::size_t match_version(std::string_view text, VersionForm form, Version* out,
                          bool* wildcard = nullptr);

// Python's \s for ASCII text: space, \t \n \v \f \r and \x1c-\x1f (what packaging strips).
bool is_py_space(char c);

}  // namespace kiln::packaging
