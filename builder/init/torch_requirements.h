// What a target's pinned torch wheel requires, from its copy in the download cache: the projects
// `kiln serve` sends to the target's torch index together with torch.
#pragma once

#include <filesystem>
#include <set>
#include <string>

#include "cache/store.h"
#include "manifest/target.h"

namespace kiln::init {

// The projects the wheel requires unconditionally (Requires-Dist without an extra), normalised;
// none when it is not in the cache's downloads or cannot be read.
std::set<std::string, std::less<>> torch_requirement_names(const cache::Store& store,
                                                           const manifest::TorchWheel& wheel);

}  // namespace kiln::init
