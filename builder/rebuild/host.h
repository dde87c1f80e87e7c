// What a rebuild is compared on before it builds, because a compiled wheel's bytes depend on it:
// the inputs of the wheel's key against the ones this host recomputes (the toolchain among them:
// nvcc's, the host compiler's and Python's version texts), and the host facts a key leaves out
// (the linker's build, the C library, the CUDA headers' digest).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "toolchain/toolchain.h"
#include "wheel/provenance.h"

namespace kiln::rebuild {

struct HostDifference {
  std::string input;     // "inputs.toolchain.cuda.nvcc_version", "ld --version", "glibc", …
  std::string recorded;  // the wheel's (the line that differs, for a text of several)
  std::string here;      // this host's
};

// Each leaf of the key's inputs where `recorded` (the wheel's) and `here` (this rebuild's) differ,
// named by its path: a differing toolchain here, or a recipe that does not reproduce the wheel's
// inputs. At most `limit`; the last says how many more.
std::vector<HostDifference> input_differences(const nlohmann::json& recorded,
                                              const nlohmann::json& here, std::size_t limit = 12);

// Each recorded host fact outside the key that this host's toolchain does not match; none for a
// pure wheel. A fact the wheel does not record (an older format) is not compared.
std::vector<HostDifference> host_differences(const wheel::Provenance& p,
                                             const toolchain::Toolchain& tc);

// "glibc: the wheel's '2.36', here '2.39'".
std::string describe(const HostDifference& d);

}  // namespace kiln::rebuild
