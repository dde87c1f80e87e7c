// The build host against the one a wheel records: what `kiln rebuild` compares before it builds,
// because a compiled wheel's bytes depend on them beyond its key (the compilers' and linker's
// exact builds, the C library, the CUDA headers, the Python).
#pragma once

#include <string>
#include <vector>

#include "toolchain/toolchain.h"
#include "wheel/provenance.h"

namespace kiln::rebuild {

struct HostDifference {
  std::string input;     // "nvcc --version", "g++ --version", "ld --version", "glibc", …
  std::string recorded;  // the wheel's (its first line)
  std::string here;      // this host's (its first line)
};

// Each recorded fact that this host's toolchain does not match; none for a pure wheel. A fact the
// wheel does not record (an older format) is not compared.
std::vector<HostDifference> host_differences(const wheel::Provenance& p,
                                             const toolchain::Toolchain& tc);

// "nvcc --version: the wheel's 'Cuda compilation tools, release 13.0, V13.0.88', here '…'".
std::string describe(const HostDifference& d);

}  // namespace kiln::rebuild
