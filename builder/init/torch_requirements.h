// What a target's pinned torch wheel requires, from its copy in the download cache: the projects
// `kiln serve` sends to the target's torch index together with torch.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include "manifest/target.h"

namespace kiln::init {

// The projects the wheel requires unconditionally (Requires-Dist without an extra), normalised;
// none when it is not in the download cache under `cache_dir` or cannot be read.
std::set<std::string, std::less<>> torch_requirement_names(const std::filesystem::path& cache_dir,
                                                           const manifest::TorchWheel& wheel);

}  // namespace kiln::init
