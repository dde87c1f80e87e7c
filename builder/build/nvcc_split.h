// nvcc's compilation of one .cu file, taken apart so that each GPU arch is its own job.
//
// `nvcc --dryrun` prints the commands nvcc would run: for each arch a preprocessor pass with
// -D__CUDA_ARCH__, cicc (device C++ to PTX, which also writes the host stub and the module id)
// and ptxas (PTX to SASS); once, the host preprocessor pass, cudafe++ (the host half), fatbinary
// (the arch images into one embedded fat binary) and the host compiler. kiln runs the device part
// of each arch from a one-arch `nvcc --fatbin` dry run, and the host part from the all-arch
// `nvcc -c` dry run with the device commands left out, its fat binary made from the per-arch
// images and cudafe++ reading the module id the device part wrote (so both halves name the
// file's internal entities alike).
//
// One value changes: __CUDA_ARCH_LIST__, which CCCL puts into the names of its inline namespaces
// (cub::CUB_300000_SM_900_1200_NS, thrust::…) that the host stub refers to. Every pass gets the
// same list, every arch this nvcc knows, so that the device part of one arch does not depend on
// the others (it is cached per arch) and matches the host part of any arch set. The list is a
// superset of the archs compiled; CUB's host-side dispatch over it picks the device's PTX version.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.h"

namespace kiln::build::nvcc {

using Env = std::vector<std::pair<std::string, std::string>>;

struct DryRun {
  Env env;  // the "#$ NAME=VALUE" lines: the environment nvcc gives its commands
  std::vector<std::vector<std::string>> commands;
};

// Parses `nvcc --dryrun` output (its stderr). Words are split like a shell would, nvcc's own
// variables ($CICC_PATH) are expanded, and programs named without a directory are found on the
// PATH nvcc sets. Anything else a shell would interpret (other variables, backslashes outside
// double quotes, backquotes) is an error: kiln then lets nvcc run the file itself.
Expected<DryRun> parse_dryrun(std::string_view text);
// One command line, with `vars` expanded.
Expected<std::vector<std::string>> shell_words(std::string_view line, const Env& vars);

enum class Step { HostPreprocess, Cudafe, DevicePreprocess, Cicc, Ptxas, Fatbinary, HostCompile, Other };
Step classify(const std::vector<std::string>& argv);

// The __CUDA_ARCH_LIST__ value for every arch in `nvcc --list-gpu-arch` output
// ("compute_75\ncompute_90a\n…" -> "750,…,900,…"); empty when there is none.
std::string arch_list_value(std::string_view list_gpu_arch);

// Sets -D__CUDA_ARCH_LIST__=… in a preprocessor or compiler command; false if it has none.
bool set_arch_list(std::vector<std::string>& argv, const std::string& value);

struct Image {
  std::string kind;  // "elf" (SASS) or "ptx"
  std::string sm;    // "90", "120a"
  std::filesystem::path file;
};

// Whether two device passes' host stubs are the same stub: equal once the front end's numbered
// temporaries (`__T681`, the registration callback's parameter) are renamed. Some archs' passes
// number them differently (sm_75's bf16 headers declare one entity more), which is harmless: the
// name is local to the stub's static callback.
bool same_stub(std::string_view a, std::string_view b);

// The device half of one arch: its commands and what the host half needs from it.
struct DevicePart {
  std::vector<std::vector<std::string>> steps;  // preprocess, cicc, ptxas (a mere check for PTX only)
  std::filesystem::path module_id;
  std::filesystem::path stub;
  std::vector<Image> images;  // what it contributes to the fat binary
};
// From `nvcc --dryrun --fatbin -gencode … ` for one arch (its fatbinary command is left out).
Expected<DevicePart> device_part(const DryRun& fatbin_dryrun, const std::string& arch_list);

struct HostPart {
  std::vector<std::vector<std::string>> steps;  // preprocess, cudafe++, fatbinary, compile
  std::filesystem::path module_id;  // where cudafe++ reads the module id from
  std::filesystem::path stub;       // where the host compile includes the stub from
};
// From `nvcc --dryrun -c -gencode …` for all archs: the device commands are left out, the fat
// binary is made from `images` (every image nvcc would embed must be there, found by kind and
// sm), with `fatbinary_flags` added.
Expected<HostPart> host_part(const DryRun& compile_dryrun, const std::string& arch_list,
                             const std::vector<Image>& images, const std::vector<std::string>& fatbinary_flags);

}  // namespace kiln::build::nvcc
