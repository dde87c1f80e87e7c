// What the build machine knows of the build: the commit kiln was built from (`kiln --version`) and
// the checkout it was built in. Generated into one file of its own, so a new commit or another
// checkout's path recompiles nothing else (and the compiler cache hits across checkouts).
#pragma once

#include <string_view>

namespace kiln::cli {

// 12 hex digits of HEAD, with "-dirty" when the tree had changes at configure time; "unknown"
// when the sources were not a git checkout. KILN_BUILD_COMMIT (CMake) overrides it.
std::string_view build_commit();

// The checkout kiln was built from; "" in the portable build (docs/portable.md), whose binary
// names no path of the machine it was built on.
std::string_view build_source_dir();

}  // namespace kiln::cli
