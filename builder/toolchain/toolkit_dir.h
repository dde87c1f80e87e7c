// The toolkit directories kiln lays out itself (from Debian's packages, from NVIDIA's wheels), and
// what the two makers share: `<toolkits>/<name>` (named by the cache's Store) is whole when its
// marker file is there, and is made by one process at a time, under `<name>.lock`, in a staging
// directory beside it that is renamed into place; its pinned files are fetched once per process
// (PinnedToolkitSource), unpacked one by one (merge_each), its nvcc asked for its release
// (run_nvcc).
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// targets/x86_64-linux/{include,lib} as an installed toolkit has them, links to ../../include and
// ../../<lib> (`lib`: "lib" or "lib64"), so nvcc's own include paths read like an installed
// toolkit's.
Expected<void> link_targets(const std::filesystem::path& root, std::string_view lib);

// The hash that names a toolkit made from pinned files: of the pins ("<sha256> <file>" each),
// sorted (the set, not its order, is the toolkit) and joined by newlines.
std::string toolkit_pins_sha256(std::vector<std::string> pins);

// The toolkit at `root` as its bin/nvcc --version tells it (failing when nvcc does not run).
Expected<CudaToolkit> run_nvcc(const std::filesystem::path& root);

// Each of `files` unpacked and merged by `step` (given the file and an empty directory of its own
// under `scratch`, "<prefix><index>"), the directory removed afterwards.
Expected<void> merge_each(
    const std::vector<std::filesystem::path>& files, const std::filesystem::path& scratch,
    std::string_view prefix,
    const std::function<Expected<void>(const std::filesystem::path& file,
                                       const std::filesystem::path& unpacked)>& step);

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

// A source whose toolkit kiln lays out from pinned files (NVIDIA's wheels, Debian's packages): on
// the first toolkit() each pin is fetched (from the download cache when it is there, so a toolkit
// can be laid out again without the network), then made() lays the toolkit out in the cache;
// later calls return the same toolkit.
class PinnedToolkitSource : public CudaSource {
 public:
  struct Pin {
    std::string file, sha256;  // as FetchPinned takes them
  };
  // `no_fetch`: the error without a FetchPinned; `context`: what a fetch error is prefixed with.
  PinnedToolkitSource(const cache::Store* cache, FetchPinned fetch, std::vector<Pin> pins,
                      std::string no_fetch, std::string context);
  Expected<CudaToolkit> toolkit() override;

 protected:
  // The toolkit from the fetched `files` (in the order of the pins), laid out in `cache`.
  virtual Expected<CudaToolkit> made(const std::vector<std::filesystem::path>& files,
                                     const cache::Store& cache) = 0;

 private:
  const cache::Store* cache_;
  FetchPinned fetch_;
  std::vector<Pin> pins_;
  std::string no_fetch_, context_;
  std::optional<CudaToolkit> ready_;
};

}  // namespace kiln::toolchain
