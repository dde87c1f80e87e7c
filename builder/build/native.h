// The native backend: compiles a manifest's extensions directly, with the flags
// torch.utils.cpp_extension would use, for exactly the target's archs, one job per translation
// unit (all archs of a TU in one nvcc, parallel through nvcc's --threads), objects cached per
// (TU, flags, toolchain); then links each module like cpp_extension.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "build/jobs.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/manifest.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::build {

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

// The compile and link argv kiln uses (exposed for tests and --explain).
std::vector<std::string> cxx_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                          const std::string& source, const std::string& object);
std::vector<std::string> nvcc_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                           const std::string& source, const std::string& object,
                                           int threads, const std::string& keep_dir);
std::vector<std::string> link_argv(const NativeContext& ctx, const std::vector<std::string>& objects,
                                   const std::string& output);

}  // namespace kiln::build
