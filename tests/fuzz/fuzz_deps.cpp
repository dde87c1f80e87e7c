// Content keys' inputs: dependency files (`gcc -MD`) and the manifests a cache hands back, which a
// shared cache's writer may have crafted. Neither parser may crash or pass its limits; a parsed
// manifest renders back to one that parses the same.
#include <algorithm>

#include "compile/content_key.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(deps) {
  std::string_view in = kiln::fuzz::text(data, size);
  if (auto paths = kiln::compile::parse_depfile(in)) {
    if (!std::is_sorted(paths->begin(), paths->end())) fail("dependency paths out of order");
    if (paths->size() > kiln::compile::kMaxDepFiles) fail("too many dependency paths");
    for (const auto& p : *paths)
      if (p.empty()) fail("an empty dependency path");
  }
  if (auto manifest = kiln::compile::parse_manifest(in)) {
    if (manifest->size() > kiln::compile::kMaxCandidates) fail("too many candidates");
    if (kiln::compile::parse_manifest(kiln::compile::render_manifest(*manifest)) != manifest)
      fail("a manifest does not round-trip");
  }
  return 0;
}
