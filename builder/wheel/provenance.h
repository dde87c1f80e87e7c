// The provenance every wheel kiln builds carries as <dist-info>/kiln.json: one typed struct,
// written by the pipeline (to_json) and read back by `kiln validate` (parse_provenance), which
// refuses a field of the wrong type with an error naming it instead of throwing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::wheel {

// "tools.torch": the torch a compiled wheel was built against (toolchain::TorchSysroot::identity).
struct BuiltTorch {
  std::string version;  // "2.11.0+cu130"
  std::string cuda;     // "13.0"
  bool cxx11_abi = false;
  std::vector<std::string> abi_flags;  // the ABI defines its cpp_extension.py passes
  std::string sha256;                  // the pinned wheel's ("" for an environment's torch)
};

// "tools": what a compiled wheel was built with.
struct BuiltTools {
  std::string nvcc;    // `nvcc --version`
  std::string cxx;     // the host compiler's version line
  std::string python;  // "3.11.7"
  BuiltTorch torch;
  // Since provenance format 2 (empty in older wheels'): the first line of the host compiler's
  // linker's `--version`, the host's glibc ("2.36"), and the CUDA toolkit's include/ tree's
  // tree_sha256 (core/fs.h). What `kiln rebuild` compares with its host before building.
  std::string ld;
  std::string glibc;
  std::string cuda_include;
};

// "rebuild" (provenance format 2): what `kiln rebuild` needs from the wheel alone that the key's
// inputs leave out. Not hashed into the key: adding it changed wheel bytes, not keys.
struct RebuildRecipe {
  std::string kiln_commit;  // the commit kiln was built from (cli::build_commit)
  // Where the source is: a url source's URL and size, a git source's URL (inputs hold its commit);
  // empty for a PyPI source (inputs hold its project, file and sha256: any index serves it) and a
  // local one (nobody else can fetch it).
  std::string source_url;
  std::optional<std::uint64_t> source_size;
  // The target's [torch] index-url ("" = the index the rebuilder configures).
  std::string torch_index_url;
  // The patch series' bytes, in order, as inputs name them (name and sha256).
  struct Patch {
    std::string name, sha256, bytes;
  };
  std::vector<Patch> patches;
};

// The caveat of a build whose package code did not run sandboxed starts with this.
inline constexpr std::string_view kNotSandboxed = "not sandboxed";
// Whether a build's caveats say it ran unsandboxed (such a wheel is no hit for a sandboxed build).
bool says_not_sandboxed(const std::vector<std::string>& caveats);

// The provenance format this kiln writes: 2 added "rebuild" and tools.ld/glibc/cuda_include.
constexpr int kProvenanceFormat = 2;

// "platform": the manylinux tag of a compiled wheel and what decided it (wheel::PlatformTag).
struct BuiltPlatform {
  std::string tag;                   // "manylinux_2_34_x86_64"
  std::string limited_by;            // "GLIBC_2.32" ("" when none)
  std::vector<std::string> highest;  // highest needed version per family
  std::string needs;  // the tag those versions need, at most `tag` (the target's floor)
};

// "setuptools": what the package's own build made (the setuptools backend only).
struct SetuptoolsBuild {
  std::string built_wheel;           // the file name pip's build gave its wheel
  std::string torch_cuda_arch_list;  // the TORCH_CUDA_ARCH_LIST it was built with
};

// The parts of "inputs" that readers use, checked and copied out by parse_provenance. Never
// written: to_json writes `inputs` as it is.
struct InputFacts {
  struct Python {            // inputs.toolchain.python
    std::string abi_tag;     // "cp311"
    std::string ext_suffix;  // ".cpython-311-x86_64-linux-gnu.so"
  };
  struct TorchPin {  // inputs.toolchain.torch (file and sha256 empty for an environment's torch)
    std::string file, sha256;
  };
  struct CudaWheel {
    std::string file, sha256;
  };
  struct CudaDeb {
    std::string path, sha256;
  };
  struct Cuda {                                    // inputs.toolchain.cuda
    std::string toolkit;                           // "system" | "wheels" | "debian"
    std::string version;                           // "13.0"
    std::optional<std::vector<CudaWheel>> wheels;  // the pinned NVIDIA wheels ("wheels" toolkit)
    std::optional<std::vector<CudaDeb>> debs;      // the pinned Debian packages ("debian")
  };
  std::optional<Python> python;
  std::optional<TorchPin> torch;
  std::optional<Cuda> cuda;
  std::optional<std::string> target_cuda;  // inputs.target.cuda.version
  struct Source {  // inputs.package.source: a downloaded archive's (empty for git and local)
    std::string file, sha256;
  };
  std::optional<Source> source;
  // inputs.package.extra_dependencies: what kiln added to the sdist's requirements.
  std::optional<std::vector<std::string>> extra_dependencies;
};

struct Provenance {
  // Every wheel's.
  std::string kiln;  // kiln's version
  int format = 1;    // kProvenanceFormat when written; 1 when absent (older kilns')
  int recipe = 0;    // resolve::kRecipeVersion
  std::string build_key;
  std::string backend;    // "native" | "setuptools" | "pure"
  nlohmann::json inputs;  // the build key's inputs, as hashed
  // Compiled wheels' (absent for pure ones).
  std::optional<std::string> archs;  // the target's archs, canonical ("sm_90;sm_120+ptx")
  std::optional<BuiltTools> tools;
  std::optional<BuiltPlatform> platform;
  // The setuptools backend's only.
  std::optional<SetuptoolsBuild> setuptools;
  // Every wheel's since format 2.
  std::optional<RebuildRecipe> rebuild;
  // Why the bytes may differ from the same build's elsewhere, and that its code ran unsandboxed
  // ("not sandboxed: …"); written only when there are any (a reproducible, sandboxed build's
  // kiln.json is as before).
  std::vector<std::string> caveats;

  InputFacts facts;  // from `inputs`, filled by parse_provenance (not written)
};

// The JSON kiln writes: the five common fields always (and "format" from format 2 on), the optional
// parts when set; format 2's fields of "tools" only in format 2 (a format 1 file reads back to the
// same bytes).
nlohmann::json to_json(const Provenance& p);
// kiln.json's bytes: to_json(p).dump(2) and a newline.
std::string provenance_text(const Provenance& p);

// Reads kiln.json. Absent fields stay empty (other tools' and older kilns' files, tests' partial
// ones); a field of another type, text that is not JSON or not an object, fails (bad input) with a
// message naming the field ("kiln.json: tools.torch is a string, not an object").
Expected<Provenance> parse_provenance(std::string_view text);
Expected<Provenance> provenance_from_json(const nlohmann::json& j);

}  // namespace kiln::wheel
