// The native backend: compiles a manifest's extensions directly, with the flags
// torch.utils.cpp_extension would use, for exactly the target's archs; then links each module
// like cpp_extension.
//
// build_native prepares the build root (fixed views, mtimes), asks nvcc for its dry runs, plans
// the job graph (job_graph.h: units and dry-run text in, jobs out, the object cache consulted) and
// runs it (runner.h). A shardable source is compiled as the number of translation units resolve
// chose (its shards). Each CUDA translation unit is one device job per arch, a host job and a
// fat-binary job (nvcc_split.h); where nvcc's dry run is not what kiln knows how to split, one nvcc
// job for all archs (parallel through --threads). Objects and device parts are cached under
// objects/ by the hash of their exact commands and the toolchain's identity, so adding an arch
// compiles only that arch's device parts and the fat binaries.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cache/store.h"
#include "compile/backend.h"
#include "compile/jobs.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/manifest.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::compile {

// The root (CompileBasics::root) is a directory whose path depends only on the package's sources
// (not on where the cache or the checkout is), holding src/ (the patched tree): paths the
// compilers record are then the same on every build of the same inputs.
struct NativeContext : CompileBasics {
  toolchain::TorchSysroot torch;
  const cache::Store* cache = nullptr;  // its objects/ holds the object cache (none: no cache)
  std::string object_salt;              // identities the objects depend on beyond their argv
  // Shard counts chosen by resolve (part of the build key): "<extension>/<source>" -> n.
  std::map<std::string, int> shards;
  // The build root's lock: every compiler and linker inherits it, so when kiln dies (SIGKILL) the
  // root stays locked until its orphaned jobs have exited, and the next build never races them.
  int root_lock_fd = -1;
};

struct BuiltModule {
  std::string wheel_path;  // "causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so"
  std::filesystem::path file;
};

struct NativeResult {
  std::vector<BuiltModule> modules;
  JobStats stats;
  std::size_t objects_reused = 0;
  std::vector<std::string> caveats;  // BuildOutput::caveats
};

Expected<NativeResult> build_native(const NativeContext& ctx);

}  // namespace kiln::compile
