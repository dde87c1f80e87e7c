// The commit kiln was built from, for `kiln --version`. Generated into one file of its own, so a
// new commit recompiles nothing else.
#pragma once

#include <string_view>

namespace kiln::cli {

// 12 hex digits of HEAD, with "-dirty" when the tree had changes at configure time; "unknown"
// when the sources were not a git checkout. KILN_BUILD_COMMIT (CMake) overrides it.
std::string_view build_commit();

}  // namespace kiln::cli
