// The native backend: compiles a manifest's extensions directly, with the flags
// torch.utils.cpp_extension would use, for exactly the target's archs; then links each module
// like cpp_extension.
//
// Jobs: a shardable source is compiled as the number of translation units resolve chose (its
// shards). Each CUDA translation unit is one device job per arch (nvcc's own device commands for
// that arch) and one host job (nvcc's host commands, with a fat binary of the device jobs'
// images): see nvcc_split.h. Objects and device parts are cached under objects/ by the hash of
// their exact commands and the toolchain's identity, so adding an arch compiles only that arch's
// device parts and the host jobs. Where nvcc's dry run is not what kiln knows how to split, the
// translation unit is one nvcc job for all archs (parallel through --threads).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "compile/jobs.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/manifest.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::compile {

struct NativeContext {
  const manifest::Manifest* manifest = nullptr;
  // A directory whose path depends only on the package's sources (not on where the cache or the
  // checkout is), holding src/ (the patched tree): paths the compilers record are then the same
  // on every build of the same inputs.
  std::filesystem::path root;
  toolchain::TorchSysroot torch;
  toolchain::PythonInfo python;
  toolchain::CudaToolkit cuda;
  toolchain::HostCompiler cxx;
  manifest::ArchList archs;
  std::filesystem::path object_cache;  // <cache>/objects
  std::string object_salt;             // identities the objects depend on beyond their argv
  int jobs = 0;                        // 0: one per core
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
};

Expected<NativeResult> build_native(const NativeContext& ctx);

// The nvcc flags of an extension's CUDA sources, less the source, output, archs and keep
// directory; `defines` are a shard's.
std::vector<std::string> nvcc_flags(const NativeContext& ctx, const manifest::Extension& ext,
                                    const std::vector<std::string>& defines);
// What kiln adds to fatbinary's command (compression).
extern const std::vector<std::string> kFatbinaryFlags;

}  // namespace kiln::compile
