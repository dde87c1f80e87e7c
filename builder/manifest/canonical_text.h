// The inverse of Manifest::canonical() and Target::canonical(): the TOML text of a manifest and of
// a target whose canonical form is a given JSON document (a wheel's kiln.json "inputs"), with what
// the canonical form leaves out given beside it. `kiln rebuild` writes these into an empty
// manifests directory and loads them as any other, so every check a manifest passes applies; the
// build key computed from what loads must then be the wheel's.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::manifest {

// What a manifest's canonical form does not hold.
struct SourcePlace {
  std::string url;                    // a url source's URL, a git source's repository
  std::optional<std::uint64_t> size;  // a url source's size, when its manifest gave one
  std::filesystem::path local;        // a local source: where it is on this machine
};

// The manifest text of `package` (inputs.package). Its patches are named as `package` names them,
// in patches/<name>/<version>/ (the default place). A malformed document is a bad-input error
// naming the field ("inputs.package.source.kind").
Expected<std::string> manifest_text(const nlohmann::json& package, const SourcePlace& place);

// The target text of `target` (inputs.target) with its torch index (not a key input).
Expected<std::string> target_text(const nlohmann::json& target, const std::string& torch_index_url);

}  // namespace kiln::manifest
