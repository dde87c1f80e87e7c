// Platform tags: the manylinux level of a set of ELF files, by auditwheel's rule: the oldest
// policy whose GLIBC_/GLIBCXX_/CXXABI_/GCC_ symbol versions cover every version they need.
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "elf/elf.h"

namespace kiln::wheel {

struct PlatformTag {
  std::string tag;       // "manylinux_2_28_x86_64"
  std::string limiting;  // the version that decided it, e.g. "GLIBC_2.32" ("" when none)
  std::vector<std::string> highest;  // highest needed version per family, e.g. "GLIBCXX_3.4.21"
  std::string needs;  // at_floor: the tag the files' symbols need ("manylinux_2_17_x86_64")
};

// Fails when a needed version is newer than every known policy.
Expected<PlatformTag> manylinux_tag(const std::vector<elf::ElfInfo>& files);

// The symbols `files` (their paths in the wheel: `names`) reference at a version newer than a floor
// of glibc 2.<floor_minor> covers: "log2@GLIBC_2.29 (in x.so)", sorted, each once.
std::vector<std::string> symbols_above_floor(const std::vector<elf::ElfInfo>& files,
                                             const std::vector<std::string>& names,
                                             int floor_minor);

// The tag of a wheel for a target whose floor is glibc 2.<floor_minor>: that floor's tag (the
// wheel installs wherever the target's torch does), with `needed`'s tag, the level its files
// need, in `needs`. Fails when they need a newer glibc, naming the version, the symbols that need
// it (`symbols`, from symbols_above_floor) and what to do.
Expected<PlatformTag> at_floor(const PlatformTag& needed, int floor_minor,
                               const std::vector<std::string>& symbols = {});

// "GLIBC_2.32" -> the oldest policy glibc minor covering it (e.g. 32), or -1 if none.
int policy_glibc_minor_for(const std::string& version_name);

// 2.11.0+cu130 and CUDA 13.0 -> "cu130torch2.11" (PEP 440 local label).
std::string local_label(const std::string& cuda_version, const std::string& torch_version);

}  // namespace kiln::wheel
