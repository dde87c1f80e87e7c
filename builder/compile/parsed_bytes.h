// A translation unit's work, as the pool estimates it before anything runs: what its compile
// parses of the package's own tree. torch's and CUDA's headers are alike for every unit; a small
// .cu that instantiates a large kernel header of the package is a long job.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::compile {

// The first `most` names `text` includes with #include "…" (not <…>).
std::vector<std::string> quoted_includes(const std::string& text, std::size_t most);

// The bytes of `source` (relative to the tree `top`) and of the tree's headers it includes with
// #include "…", transitively, each counted once: a name is looked up beside the including file,
// else in `include_dirs` (relative to `top`). Regular files inside the tree only (links resolved
// and checked, files read without following a link); bounded whatever the tree holds: 512 files
// of at most 4 MiB, the first 256 includes of each. 0 where `top` is not a directory.
double parsed_bytes(const std::filesystem::path& top, const std::filesystem::path& source,
                    const std::vector<std::string>& include_dirs);

}  // namespace kiln::compile
