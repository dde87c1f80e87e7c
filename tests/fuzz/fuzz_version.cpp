// PEP 440 versions and wheel file names (packaging/): any text parses or is refused; a version's
// canonical text parses back to an equal version and is a fixed point; the ordering is a strict
// weak order on what the input holds; a wheel file name's fields are what it was built from; a
// package argument parses or is refused, and a marker evaluates exactly when it parses.
#include "fuzz.h"
#include "packaging/marker.h"
#include "packaging/specifier.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

using kiln::packaging::Version;

namespace {

void check_round_trip(const Version& v) {
  std::string canonical = v.str();
  auto back = Version::parse(canonical);
  if (!back) kiln::fuzz::fail("the canonical text does not parse: " + canonical);
  if (!(*back == v)) kiln::fuzz::fail("the canonical text parses to another version: " + canonical);
  if (back->str() != canonical) kiln::fuzz::fail("the canonical text is not a fixed point");
  if (!kiln::packaging::is_canonical_version(canonical) && !v.has_local())
    kiln::fuzz::fail("a public canonical text is not canonical: " + canonical);
}

}  // namespace

KILN_FUZZ_TARGET(version) {
  std::string_view text = kiln::fuzz::text(data, size);
  // Each line a version; every pair of those that parse must be ordered consistently (the first
  // 24: the check is cubic).
  std::vector<Version> versions;
  std::size_t start = 0;
  while (start <= text.size() && versions.size() < 24) {
    std::size_t end = std::min(text.find('\n', start), text.size());
    if (auto v = Version::parse(text.substr(start, end - start))) {
      check_round_trip(*v);
      versions.push_back(std::move(*v));
    }
    start = end + 1;
  }
  for (const auto& a : versions)
    for (const auto& b : versions) {
      int ab = compare(a, b), ba = compare(b, a);
      if (ab != -ba)
        kiln::fuzz::fail("compare(a, b) is not -compare(b, a): " + a.str() + " " + b.str());
      for (const auto& c : versions)
        if (ab < 0 && compare(b, c) < 0 && compare(a, c) >= 0)
          kiln::fuzz::fail("the ordering is not transitive: " + a.str() + " " + b.str() + " " +
                           c.str());
    }
  if (auto r = kiln::packaging::parse_requirement(text))
    if (!r->marker.empty() && !kiln::packaging::is_valid_marker(r->marker))
      kiln::fuzz::fail("a package argument's marker does not parse");
  static const kiln::packaging::MarkerEnvironment env = {{"python_version", "3.12"},
                                                         {"python_full_version", "3.12.7"},
                                                         {"os_name", "posix"},
                                                         {"sys_platform", "linux"},
                                                         {"extra", ""}};
  auto value = kiln::packaging::evaluate_marker(text, env);
  bool parses = kiln::packaging::is_valid_marker(text);
  bool refused_as_no_marker =
      !value && value.error().message.find("is not an environment marker") != std::string::npos;
  if (parses == refused_as_no_marker)
    kiln::fuzz::fail("evaluate_marker and is_valid_marker disagree on whether it parses");
  if (auto w = kiln::packaging::parse_wheel_file_name(text)) {
    if (!(w->parsed_version == *Version::parse(w->version)))
      kiln::fuzz::fail("a wheel's parsed version is not its version's");
    // Every combination of the tag sets (a file name on disk has at most 255 bytes: at most 42^3).
    std::size_t n = w->python_tags.size() * w->abi_tags.size() * w->platform_tags.size();
    if (n <= 100000 && w->tags().empty()) kiln::fuzz::fail("a wheel file name without tags");
  }
  return 0;
}
