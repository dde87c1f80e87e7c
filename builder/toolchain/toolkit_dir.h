// The toolkit directories kiln lays out itself (from Debian's packages, from NVIDIA's wheels), and
// what the two makers share: the cache makes each once (Store::ensure: under its lock, in staging,
// renamed into place with its marker, kiln-toolkit.json); its pinned files are fetched once per
// process (pinned_toolkit_source), unpacked one by one (merge_each), its nvcc asked for its release
// (run_nvcc).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "core/expected.h"
#include "toolchain/cuda.h"

namespace kiln::toolchain {

// Whether something (a link too, dangling or not) is at `p`.
bool present(const std::filesystem::path& p);

// A symlink at `at` to `target`, unless something is there already.
Expected<void> link_once(const std::filesystem::path& target, const std::filesystem::path& at,
                         bool directory);

// Of what nvcc needs to compile in every toolkit (nvcc and its profile, cudafe++, ptxas, fatbinary,
// nvlink, cicc, libdevice, the runtime and host-config headers) and of `extra`, the paths relative
// to `root` that are not there (links followed: they must resolve).
std::vector<std::string> missing_files(const std::filesystem::path& root,
                                       const std::vector<std::string>& extra);

// targets/x86_64-linux/{include,lib} as an installed toolkit has them, links to ../../include and
// ../../<lib> (`lib`: "lib" or "lib64"), so nvcc's own include paths read like an installed
// toolkit's.
Expected<void> link_targets(const std::filesystem::path& root, std::string_view lib);

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

// The toolkit `what` of `cache`, made first (by `maker.make`, then marked with what it returns)
// when it is not whole, then opened.
Expected<CudaToolkit> ensure_toolkit(const cache::Store& cache, cache::MadeOnce what,
                                     const ToolkitMaker& maker);

// The hash that names a toolkit made from `pins`: of "<sha256> <file>" each, sorted (the set, not
// its order, is the toolkit) and joined by newlines.
std::string toolkit_pins_sha256(const std::vector<CudaRequest::Pin>& pins);

// What a toolkit kiln lays out from pinned files (NVIDIA's wheels, Debian's packages) is: its
// pins, its identity for the key, and how the fetched files become a toolkit in the cache.
struct PinnedToolkit {
  std::vector<CudaRequest::Pin> pins;
  std::string no_fetch;  // the error when there is no FetchPinned
  std::string context;   // what a fetch error is prefixed with
  std::function<Expected<nlohmann::json>()> identity;
  // The toolkit from the fetched files (in the order of the pins), laid out in the cache.
  std::function<Expected<CudaToolkit>(const std::vector<std::filesystem::path>& files,
                                      const cache::Store& cache)>
      made;
};

// Its CudaSource: on the first toolkit() each pin is fetched (from the download cache when it is
// there, so a toolkit can be laid out again without the network), then made() lays the toolkit out
// in `cache`; later calls return the same toolkit.
std::unique_ptr<CudaSource> pinned_toolkit_source(PinnedToolkit toolkit, const cache::Store* cache,
                                                  FetchPinned fetch);

}  // namespace kiln::toolchain
