// `kiln wheel pack`: a directory laid out as a wheel's contents, written as a wheel the way kiln
// writes its own (entries sorted, fixed times and modes, RECORD made afresh).
#pragma once

#include <filesystem>

#include "core/expected.h"

namespace kiln::wheel {

// DIR holds exactly one <name>-<version>.dist-info with METADATA (whose Name and Version match
// the folder's) and WHEEL (its Tag lines name the tag set); everything else is the wheel's
// files, regular files and folders only. A RECORD already there is replaced. Writes
// <out_dir>/<name>-<version>-<tags>.whl atomically and returns its path.
Expected<std::filesystem::path> pack_wheel(const std::filesystem::path& dir,
                                           const std::filesystem::path& out_dir);

}  // namespace kiln::wheel
