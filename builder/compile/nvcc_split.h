// nvcc's compilation of one .cu file, taken apart so that each GPU arch is its own job.
//
// `nvcc --dryrun` prints the commands nvcc would run: for each arch a preprocessor pass with
// -D__CUDA_ARCH__, cicc (device C++ to PTX, which also writes the host stub and the module id)
// and ptxas (PTX to SASS); once, the host preprocessor pass, cudafe++ (the host half), fatbinary
// (the arch images into one embedded fat binary) and the host compiler. kiln runs the device part
// of each arch from a one-arch `nvcc --fatbin` dry run, and the host part from an `nvcc -c` dry
// run with the device commands left out, cudafe++ reading the module id a device pass wrote (so
// both halves name the file's internal entities alike).
//
// The host half does not wait for the device halves. The stub it includes registers the file's
// kernels and embeds the fat binary by including "x.fatbin.c"; kiln writes that file as a mere
// reference (fatbin_reference: nvcc's wrapper, pointing at a hidden symbol) and puts the fat
// binary itself into a second, tiny object (fatbin_assembly: `.incbin` into .nv_fatbin). The
// linked module holds what nvcc's single object held. The stub and module id come from the
// device front end alone (front_end_part: the lowest arch's preprocess and cicc at -O0, which
// writes the same stub and id as the optimizing pass in a fraction of its time), so adding an
// arch re-runs no host job and a one-arch build compiles its host half beside the device half.
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

namespace kiln::compile::nvcc {

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

enum class Step {
  HostPreprocess,
  Cudafe,
  DevicePreprocess,
  Cicc,
  Ptxas,
  Fatbinary,
  HostCompile,
  Other
};
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
// Line markers that name the stub file itself are also ignored.
bool same_stub(std::string_view a, std::string_view b);
// The stub a pass wrote to `from`, as if written to `to`: its line markers that name itself.
std::string moved_stub(std::string_view stub, const std::filesystem::path& from,
                       const std::filesystem::path& to);

// The device half of one arch: its commands and what the host half needs from it.
struct DevicePart {
  std::vector<std::vector<std::string>>
      steps;  // preprocess, cicc, ptxas (a mere check for PTX only)
  std::filesystem::path module_id;
  std::filesystem::path stub;
  std::vector<Image> images;  // what it contributes to the fat binary
};
// From `nvcc --dryrun --fatbin -gencode … ` for one arch (its fatbinary command is left out).
Expected<DevicePart> device_part(const DryRun& fatbin_dryrun, const std::string& arch_list);

// The device front end alone: the preprocess and cicc steps of a one-arch `nvcc --dryrun --fatbin
// -Xcicc -O0` (no ptxas, no images). It writes the stub and module id the optimizing pass of the
// same arch writes; the builder checks that it did.
Expected<DevicePart> front_end_part(const DryRun& fatbin_dryrun, const std::string& arch_list);

struct HostPart {
  std::vector<std::vector<std::string>> steps;  // preprocess, cudafe++, compile
  std::filesystem::path module_id;              // where cudafe++ reads the module id from
  std::filesystem::path stub;                   // where the host compile includes the stub from
  std::filesystem::path
      fatbin_source;  // the "x.fatbin.c" the stub includes (fatbin_reference goes there)
  std::vector<std::string> fatbinary;  // makes the fat binary of every arch, for fatbin_assembly
  std::filesystem::path fatbin;        // the file it makes
};
// From `nvcc --dryrun -c -gencode …`: the device commands are left out, the fat binary is made
// from `images` (every image nvcc would embed must be there, found by kind and sm), with
// `fatbinary_flags` added, as a file of its own. The builder takes the host steps from a dry run
// of the lowest arch alone (nvcc names the host intermediates and defines __CUDA_ARCH__ after
// the last -gencode: the host part is then the same for every arch set with that lowest arch)
// and the fatbinary command from a dry run of all.
Expected<HostPart> host_part(const DryRun& compile_dryrun, const std::string& arch_list,
                             const std::vector<Image>& images,
                             const std::vector<std::string>& fatbinary_flags);

// The "x.fatbin.c" the host compile includes: nvcc's fat binary wrapper (section .nvFatBinSegment,
// which the stub registers with the CUDA runtime), pointing at `symbol` instead of the data.
std::string fatbin_reference(const std::string& symbol);
// Assembler source that defines `symbol` (global, hidden) as the bytes of `fatbin` in section
// .nv_fatbin, where nvcc's own fatbin.c puts them.
std::string fatbin_assembly(const std::string& symbol, const std::filesystem::path& fatbin);

}  // namespace kiln::compile::nvcc
