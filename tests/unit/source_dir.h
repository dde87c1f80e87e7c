// The checkout the tests were built from, for the data they read (tests/data, manifests/,
// patches/). Generated into one file of its own (tests/source_dir.cpp.in), so the compiler cache
// serves every other test file across checkouts.
#pragma once

#include <string>

namespace kiln::test {

std::string source_dir();

}  // namespace kiln::test
