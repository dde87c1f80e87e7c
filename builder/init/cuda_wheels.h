// NVIDIA's CUDA compiler wheels for a torch: the release torch pins (`cuda-toolkit==13.2.2`), its
// metapackage's `nvcc` and `cccl` extras (nvcc, crt, nvvm, the runtime, CCCL), each resolved to one
// Linux x86_64 wheel on the index with its sha256.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"
#include "fetch/source.h"
#include "manifest/target.h"
#include "packaging/wheel_name.h"
#include "toolchain/cuda.h"

namespace kiln::init {

struct ToolkitWheels {
  std::string release;  // "13.2.2"
  std::vector<manifest::CudaWheel> wheels;
  // The GCC majors its nvcc takes as host compiler, from the crt wheel's host_config.h, and
  // where that was read ("<crt wheel>:nvidia/cu13/include/crt/host_config.h").
  toolchain::GccRange gcc;
  std::string gcc_from;
};

// `release` "": the newest cuda-toolkit release of `cuda_version` ("13.2") on the index. The crt
// wheel (about 130 KB) is downloaded for its host_config.h.
Expected<ToolkitWheels> cuda_toolkit_wheels(fetch::Downloader& downloader, const std::string& index,
                                            const std::string& cuda_version, std::string release);

// The newest Linux x86_64 wheel of `project` whose version satisfies "==`spec`" on a page.
Expected<fetch::IndexFile> newest_wheel(const std::vector<fetch::IndexFile>& page,
                                        const std::string& project, const std::string& spec);

// The top-level *.dist-info/METADATA of a wheel file (at most 4 MiB); `check_names`: hold every
// entry name to archive::zip_name_problem.
Expected<std::string> wheel_metadata(const std::filesystem::path& wheel, bool check_names);

// A wheel file name without a build tag (what kiln pins), read as packaging reads it; else none.
std::optional<packaging::WheelFileName> unbuilt_wheel(std::string_view file);
// Whether one of a wheel's platform tags ("manylinux_2_27_x86_64.manylinux_2_28_x86_64", "any")
// installs on Linux x86_64.
bool is_linux_x86_64(const packaging::WheelFileName& wheel);

}  // namespace kiln::init
