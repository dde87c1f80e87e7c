// What a torch wheel's metadata says about CUDA, and what NVIDIA's cuda-toolkit metapackage pins:
// the Requires-Dist lines `kiln target init --torch` reads, never guessing from a `+cuXYZ` label.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::init {

// One Requires-Dist value, as far as kiln reads it: "cuda-toolkit[cudart,nvcc]==13.2.2;
// platform_system == 'Linux'" -> {"cuda-toolkit", {"cudart", "nvcc"}, "==", "13.2.2",
// "platform_system == 'Linux'"}. Only a single `==` or `===` specifier is taken apart; other
// specifiers stay in `specifier` whole with an empty `op`.
struct Requirement {
  std::string name;  // as written
  std::vector<std::string> extras;
  std::string op;         // "==", "===", or "" when the specifier is anything else
  std::string version;    // "13.2.2", "13.2.86.*"
  std::string specifier;  // the whole version specifier, as written
  std::string marker;     // after ';', trimmed
  // The extra the marker requires ("nvcc" for "... and extra == 'nvcc'"), "" when none.
  std::string marker_extra() const;
};
std::optional<Requirement> parse_requirement(std::string_view text);

// A METADATA a stranger served, before kiln reads its Requires-Dist: a value holding a control
// character (a folded line's line break among them) is refused, the error naming `where` (the
// URL it came from) and the field; kiln never writes down what it cannot show faithfully.
Expected<void> check_requires_dist(std::string_view metadata, std::string_view where);

// torch's CUDA, from its metadata.
struct TorchCuda {
  std::string version;  // "13.2"
  std::string release;  // the toolkit release torch pins ("13.2.2"), "" when it pins none
  std::string source;   // the requirement it was read from, as written
};
// From `cuda-toolkit[…]==13.2.2` (torch 2.11 and newer on PyPI), else from the CUDA runtime's pin
// (`nvidia-cuda-runtime-cu12==12.8.90`, `nvidia-cuda-runtime==13.0.96`); nothing for a CPU build.
std::optional<TorchCuda> cuda_from_metadata(std::string_view metadata);

// The components kiln's wheel toolkit needs (nvcc, crt, nvvm, the runtime, CCCL) as cuda-toolkit's
// metadata pins them for its `nvcc`, `crt`, `nvvm`, `cudart` and `cccl` extras (13.0.2's `nvcc`
// extra names nvcc alone, 13.2.2's names crt, nvvm and the runtime too): project name
// (normalised) and version spec ("13.2.86.*"), sorted by project, each once.
struct Component {
  std::string project;
  std::string version;  // the `==` operand, maybe ending in ".*"
  bool operator==(const Component&) const = default;
};
std::vector<Component> toolkit_components(std::string_view cuda_toolkit_metadata);

// Whether `version` satisfies "==`spec`" as packaging matches it (packaging/specifier.h): prefix
// matching for a trailing ".*", release equality with zero padding otherwise ("13.0.3.0" ==
// "13.0.3"); exact text when either is no version.
bool version_matches(std::string_view version, std::string_view spec);

}  // namespace kiln::init
