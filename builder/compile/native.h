// The native backend: compiles a manifest's extensions directly, with the flags
// torch.utils.cpp_extension would use, for exactly the target's archs; then links each module
// like cpp_extension.
//
// plan_native prepares the build root (fixed views, mtimes), asks nvcc for its dry runs and plans
// the job graph (job_graph.h: units and dry-run text in, jobs out, the object cache consulted);
// the jobs run in the plan's one pool (pipeline), or alone (build_alone). A shardable source is
// compiled as the number of translation units resolve chose (its shards). Each CUDA translation
// unit is one device job per arch, a host job and a fat-binary job (nvcc_split.h); where nvcc's dry
// run is not what kiln knows how to split, one nvcc job for all archs (parallel through --threads).
// Objects and device parts are cached under objects/ by the hash of their exact commands and the
// toolchain's identity, so adding an arch compiles only that arch's device parts and the fat
// binaries.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
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

// The package's jobs, each in the build's sandbox (the root lent to it until `finish`), in the
// order the runner starts them; `finish`, once they all succeeded, gives the root back and says
// which modules they made.
struct NativeBuild {
  std::vector<Job> jobs;
  std::function<Expected<NativeResult>()> finish;
  std::shared_ptr<bool> stale;  // JobGraph::stale
};
Expected<NativeBuild> plan_native(const NativeContext& ctx);

}  // namespace kiln::compile
