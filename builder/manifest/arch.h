// CUDA architecture specs: every spelling users bring, one normalised form.
//
//   TORCH_CUDA_ARCH_LIST style: "9.0;10.0 12.0+PTX", named sets ("Hopper")
//   CMake style:                "90-real;120-virtual", "90" (= SASS + PTX)
//   nvcc style:                 "sm_90", "sm_90a", "compute_90"
//
// Meanings: 9.0 = sm_90 = 90-real = SASS only; 9.0+PTX = 90 = SASS + PTX;
// compute_90 = 90-virtual = PTX only. The a/f suffixes are kept exact.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::manifest {

struct Arch {
  int major = 0;
  int minor = 0;
  char suffix = 0;  // 0, 'a' or 'f'
  bool sass = false;
  bool ptx = false;

  int number() const { return major * 10 + minor; }  // 90, 120
  std::string sm_name() const;                       // "sm_90a"
  std::string compute_name() const;                  // "compute_90a"
  auto operator<=>(const Arch&) const = default;
};

struct ArchSpecError {
  std::size_t offset = 0;  // where in the spec text the bad token starts
  std::string message;
};

class ArchList {
 public:
  static Expected<ArchList> parse(std::string_view spec);  // error message names the token
  // Like parse, but reports where the bad token starts (for located manifest errors).
  static bool parse(std::string_view spec, ArchList& out, ArchSpecError& error);

  const std::vector<Arch>& archs() const { return archs_; }
  bool empty() const { return archs_.empty(); }

  // "sm_90;sm_120+ptx" style canonical text: one token per arch, sorted.
  std::string canonical() const;
  // TORCH_CUDA_ARCH_LIST text, e.g. "9.0;12.0+PTX"; PTX-only archs become "X.Y+PTX".
  std::string torch_arch_list() const;
  // A slug for target names: "sm90-sm120-ptx120".
  std::string slug() const;
  // One list per arch, in order: each arch's own canonical token and -gencode flags.
  std::vector<ArchList> each() const;
  // nvcc -gencode flags for exactly these archs.
  std::vector<std::string> gencode_flags() const;

  bool operator==(const ArchList&) const = default;

 private:
  std::vector<Arch> archs_;  // sorted by (major, minor, suffix), unique
};

// Every arch kiln knows as TORCH_CUDA_ARCH_LIST writes it ("9.0"), with its arch-specific ("9.0a":
// sm_90 and sm_100 on) and family ("10.0f": sm_100 on) variants, oldest first: what completion
// offers for an arch spec.
std::vector<std::string> known_arch_names();

// What a CUDA release can compile `arch` for: "" when it can, else why not, naming the limit
// ("sm_120 needs CUDA 12.8 or newer (this toolkit is 12.4)", "CUDA 13.0 no longer builds sm_70
// (CUDA 13 builds sm_75 and newer: use a CUDA 12 toolkit)"). `cuda_version` is "major.minor".
std::string arch_toolkit_problem(const Arch& arch, std::string_view cuda_version);
// The problems of every arch of `archs`, joined with "; " ("" when the toolkit builds them all).
std::string archs_toolkit_problem(const ArchList& archs, std::string_view cuda_version);

}  // namespace kiln::manifest
