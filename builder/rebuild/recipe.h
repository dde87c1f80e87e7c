// A wheel's build from its kiln.json alone: the manifest, the patches and the target written into
// a fresh directory from the key's inputs and the "rebuild" recipe beside them, then loaded as any
// other manifests directory (every check a manifest passes applies). What cannot be fetched by
// anyone but the builder (a local tree, an environment's torch, a system toolkit) is named.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/expected.h"
#include "wheel/provenance.h"

namespace kiln::rebuild {

struct Recipe {
  std::filesystem::path manifests;    // <work>/manifests: the package's manifest and the target
  std::filesystem::path patches;      // <work>/patches
  std::string requirement;            // "name==version"
  std::string target;                 // "<work>/manifests/targets/rebuild.toml"; "" for pure
  std::map<std::string, int> shards;  // inputs.shards: the counts the wheel was built with
  // Inputs nobody but the builder can fetch, each as "what: why" (a rebuild needs --force).
  std::vector<std::string> unverifiable;
};

// Writes the recipe of the wheel whose kiln.json is `p` under `work` (which must exist and be
// empty). `local_source`: the tree a local source is rebuilt from (--source), else empty. A
// kiln.json that is not format 2, or whose recipe does not match its inputs (a patch whose bytes
// are not the sha256 the inputs name), is refused naming why.
Expected<Recipe> write_recipe(const wheel::Provenance& p, const std::filesystem::path& work,
                              const std::filesystem::path& local_source);

}  // namespace kiln::rebuild
