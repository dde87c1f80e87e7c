// Python package files from a source tree: the pure backend's whole job, and the Python half of
// every compiled package.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"
#include "wheel/writer.h"

namespace kiln::compile {

// Every file of each listed package (dotted names; looked up under the tree's root, then src/),
// recursively, without __pycache__ and *.pyc; paths as they go into the wheel.
Expected<std::vector<wheel::WheelEntry>> collect_packages(const std::filesystem::path& tree,
                                                          const std::vector<std::string>& packages);

}  // namespace kiln::compile
