// The CUDA toolkit: where it is, which version its nvcc is, and where it comes from. Three sources
// behind one interface, one file each: the machine's toolkit (cuda_system.cpp), a toolkit kiln
// lays out from pinned NVIDIA wheels in its cache (cuda_wheels.cpp), and one from pinned Debian
// packages (cuda_debian.cpp).
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/made.h"
#include "core/expected.h"
#include "manifest/toolkit.h"
#include "toolchain/compiler.h"

namespace kiln::cache {
class Store;  // cache/store.h: where a toolkit kiln lays out is kept
}  // namespace kiln::cache

namespace kiln::toolchain {

struct CudaToolkit {
  std::filesystem::path home;  // CUDA_HOME
  std::filesystem::path nvcc;
  std::string version;       // "13.0"
  std::string version_text;  // nvcc --version, whole

  int major() const;
  nlohmann::json identity() const;
};

// What a target asks for (the toolchain stage does not read targets itself).
struct CudaRequest {
  // A pinned file, as FetchPinned takes it: a wheel's file name, or a Debian package's pool path
  // ("pool/non-free/n/...deb").
  struct Pin {
    std::string file, sha256;
  };
  manifest::ToolkitKind toolkit = manifest::ToolkitKind::System;
  std::string version;      // "13.0": what torch was built with
  std::string home;         // system: the target's cuda.home (optional)
  std::vector<Pin> wheels;  // wheels: the pinned set
  std::vector<Pin> debs;    // debian: the pinned packages
};

// Gets a pinned file (a wheel by file name, a Debian package by pool path) into the download cache
// and returns its path.
using FetchPinned = std::function<Expected<std::filesystem::path>(const std::string& file,
                                                                  const std::string& sha256)>;

class CudaSource {
 public:
  virtual ~CudaSource() = default;
  // What the build key records about the toolkit, as cheaply as possible: the system toolkit is
  // found and asked for its version; the wheel toolkit is its pins (nothing is downloaded).
  virtual Expected<nlohmann::json> identity() = 0;
  // The toolkit, ready to compile with (the wheel toolkit is downloaded and laid out once).
  virtual Expected<CudaToolkit> toolkit() = 0;
};

// `cache`: the cache a wheel or Debian toolkit is laid out in (it must outlive the source; nullptr
// when only identity() is asked for, as resolve does); `fetch`: how those sources get their pinned
// files (unused by system).
std::unique_ptr<CudaSource> make_cuda_source(const CudaRequest& request, const cache::Store* cache,
                                             FetchPinned fetch);

// The three sources (make_cuda_source picks one by request.toolkit).
std::unique_ptr<CudaSource> system_cuda_source(const CudaRequest& request);
std::unique_ptr<CudaSource> wheels_cuda_source(const CudaRequest& request,
                                               const cache::Store* cache, FetchPinned fetch);
std::unique_ptr<CudaSource> debian_cuda_source(const CudaRequest& request,
                                               const cache::Store* cache, FetchPinned fetch);

// The system toolkit: looks in `home_hint` (the target's), $CUDA_HOME, $CUDA_PATH, nvcc on PATH,
// /usr/local/cuda.
Expected<CudaToolkit> detect_cuda(const std::string& home_hint);
// The wheel toolkit: wheel_toolkit_of(), unpacked and laid out like an installed toolkit (bin/,
// nvvm/, include/, lib/ with lib64 and targets/x86_64-linux/ links), made whole in a temporary
// directory and renamed into place under a lock (Store::ensure). `wheels` are the pinned files
// already in the download cache, in the order of `request.wheels`.
Expected<CudaToolkit> cuda_from_wheels(const CudaRequest& request,
                                       const std::vector<std::filesystem::path>& wheels,
                                       const cache::Store& cache);
// The wheel toolkit of `request` as the cache keeps it (cache::wheel_toolkit: named after CUDA's
// version and the hash of the pinned set, toolkit_pins_sha256).
cache::MadeOnce wheel_toolkit_of(const CudaRequest& request);

// The Debian toolkit: debian_toolkit_of(), the packages' data read with archive::unpack_deb and
// laid out like an installed toolkit (bin/, nvvm/, include/ with CCCL, lib64/ with libcudart and
// lib -> lib64) with kiln's own bin/nvcc.profile, every path relative to nvcc ($(_HERE_)), so
// nothing is read from /usr or /usr/local/cuda; made whole in a temporary directory and renamed
// into place under a lock (Store::ensure). `debs`: the pinned files in the
// download cache, in the order of `request.debs`.
Expected<CudaToolkit> cuda_from_debs(const CudaRequest& request,
                                     const std::vector<std::filesystem::path>& debs,
                                     const cache::Store& cache);
// The CUDA release of the pinned nvidia-cuda-toolkit package ("nvidia-cuda-toolkit_12.4.131~..."
// -> "12.4"), known without downloading anything.
Expected<std::string> debian_release(const CudaRequest& request);
// The Debian toolkit of `request` as the cache keeps it (cache::debian_toolkit: named after the
// release, "unknown" when the pins name none, and the hash of the pinned set).
cache::MadeOnce debian_toolkit_of(const CudaRequest& request);
// Where a toolkit file comes from in a Debian package's data ("usr/bin/ptxas" -> "bin/ptxas"),
// or "" when a build does not need it.
std::string debian_toolkit_path(std::string_view package_path);

// Whether an nvcc of release `compiler` may build extensions for a torch built with CUDA `torch`:
// the same major, and a compiler minor no newer than torch's (CUDA's minor version
// compatibility: torch's runtime of that major, libcudart.so.<major>, runs what an older minor's
// compiler built). Returns the rule that allows it, for the build key and the log.
Expected<std::string> cuda_compatibility(const std::string& compiler, const std::string& torch);
// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0"
std::string parse_nvcc_release(const std::string& version_text);
// Fails, naming the toolkit needed, when the majors differ.
Expected<void> check_cuda_matches(const CudaToolkit& toolkit, const std::string& wanted_version,
                                  const std::string& wanted_by);

// The GCC majors a toolkit accepts as nvcc's host compiler: the newest from its own
// include/crt/host_config.h ("#if __GNUC__ > 15"), the oldest CCCL's C++17 needs (7).
struct GccRange {
  int min = 7;
  int max = 0;  // 0: unknown (no host_config.h)
};
GccRange supported_gcc(const CudaToolkit& toolkit);
// The N of the GNU block of a host_config.h's text ("#if __GNUC__ > N", then
// "#error -- unsupported GNU version!" on a later line); 0 when there is none.
int host_config_gcc_max(std::string_view host_config);
// Fails with what to do when `cxx` is a GCC outside `range` (of CUDA `cuda`, read from `where`);
// other compilers, and an unknown range, pass.
Expected<void> check_gcc_range(const GccRange& range, const std::string& cuda,
                               const std::string& where, const HostCompiler& cxx);
// check_gcc_range with the toolkit's own range.
Expected<void> check_host_compiler(const CudaToolkit& toolkit, const HostCompiler& cxx);

}  // namespace kiln::toolchain
