// The native backend's compile and link commands: the flags torch.utils.cpp_extension would use,
// through the build root's fixed views (torch/, cuda/, python/), so that the paths compilers
// record are the same on every build of the same inputs.
#pragma once

#include <string>
#include <vector>

#include "compile/native.h"

namespace kiln::compile {

// The nvcc flags of an extension's CUDA sources, less the source, output, archs and keep
// directory; `defines` are a shard's.
std::vector<std::string> nvcc_flags(const NativeContext& ctx, const manifest::Extension& ext,
                                    const std::vector<std::string>& defines);
// nvcc, as the build root's cuda/ view names it.
std::string nvcc_path(const NativeContext& ctx);
// What kiln adds to fatbinary's command (compression).
extern const std::vector<std::string> kFatbinaryFlags;

// A host C++ source's compile.
std::vector<std::string> cxx_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                          const std::vector<std::string>& defines,
                                          const std::string& source, const std::string& object);
// One nvcc for all archs (where kiln does not split the file per arch), run after `prefix` (the
// PID namespace nvcc's commands run in, or nothing).
std::vector<std::string> nvcc_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                           const std::vector<std::string>& defines,
                                           const std::string& source, const std::string& object,
                                           int threads, const std::string& keep_dir,
                                           const std::vector<std::string>& prefix);
// A module's link, like cpp_extension's with --as-needed: the extension's library-dirs and
// libraries first, torch's libraries (without cudart, c10_cuda and torch_cuda for a "cxx" kind),
// then its extra-link-args.
std::vector<std::string> link_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                   const std::vector<std::string>& objects,
                                   const std::string& output);

// "pkg.mod" + ".cpython-311-x86_64-linux-gnu.so" -> "pkg/mod.cpython-311-x86_64-linux-gnu.so".
std::string module_path(const std::string& name, const std::string& suffix);

// cudart, c10_cuda, torch_cuda: what a "cxx" extension does not link.
bool is_cuda_link_library(const std::string& lib);

void append(std::vector<std::string>& to, const std::vector<std::string>& from);

}  // namespace kiln::compile
