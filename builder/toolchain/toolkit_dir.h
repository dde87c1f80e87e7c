// The toolkit directories kiln lays out itself (from Debian's packages, from NVIDIA's wheels):
// `<toolkits>/<name>` is whole when its marker file is there, and is made by one process at a time,
// under `<name>.lock`, in a staging directory beside it that is renamed into place.
#pragma once

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "toolchain/cuda.h"

namespace kiln::toolchain {

inline constexpr const char* kToolkitMarker = "kiln-toolkit.json";

// Whether something (a link too, dangling or not) is at `p`.
bool present(const std::filesystem::path& p);

// A symlink at `at` to `target`, unless something is there already.
Expected<void> link_once(const std::filesystem::path& target, const std::filesystem::path& at,
                         bool directory);

struct ToolkitMaker {
  std::function<Expected<CudaToolkit>(const std::filesystem::path& root)> open;
  // Fills the empty `root` (with `scratch`, an empty directory of its own, for anything else) and
  // returns what the marker records; runs under the lock.
  std::function<Expected<nlohmann::json>(const std::filesystem::path& root,
                                         const std::filesystem::path& scratch)>
      make;
  std::string what;  // "the CUDA toolkit from 7 Debian packages", for the log
};

// `dest` opened when whole; else made (by `maker.make` in a staging root, marked, renamed in)
// under its lock, after removing what a maker that died left, then opened.
Expected<CudaToolkit> ensure_toolkit(const std::filesystem::path& dest, const ToolkitMaker& maker);

}  // namespace kiln::toolchain
