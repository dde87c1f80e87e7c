// What of the build host a compiled wheel's bytes may depend on beyond the key's toolchain: the
// linker the host compiler runs, the C library, the CUDA headers. Recorded in kiln.json's "tools"
// and compared by `kiln rebuild` before it builds.
#pragma once

#include <string>

#include "core/expected.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"

namespace kiln::toolchain {

struct HostFacts {
  std::string ld;            // first line of `<the compiler's ld> --version`
  std::string glibc;         // "2.36"
  std::string cuda_include;  // tree_sha256 (core/fs.h) of the toolkit's include/ ("" if none)
};

Expected<HostFacts> probe_host_facts(const HostCompiler& cxx, const CudaToolkit& cuda);

}  // namespace kiln::toolchain
