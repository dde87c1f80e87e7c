#include "compile/flags.h"

#include <algorithm>

#include "compile/compat.h"

namespace kiln::compile {

namespace {

// torch.utils.cpp_extension's nvcc defaults.
const std::vector<std::string> kCommonNvccFlags = {
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr"};

// The host flags cpp_extension takes from Python's sysconfig, without -g: kiln ships no host
// debug info (smaller wheels, faster compiles, nothing path-dependent).
const std::vector<std::string> kCommonCxxFlags = {
    "-fno-strict-overflow", "-Wsign-compare", "-DNDEBUG", "-O2", "-Wall", "-fPIC"};

bool has_std_flag(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f.rfind("-std=", 0) == 0 || f.rfind("--std=", 0) == 0 || f == "-std";
  });
}

std::vector<std::string> include_flags(const NativeContext& ctx, const manifest::Extension& ext) {
  std::vector<std::string> flags;
  if (ctx.manylinux < kCompatBelow) flags.push_back("-I" + compat_dir(ctx.root).string());
  for (const auto& dir : ext.include_dirs)
    flags.push_back("-I" + (ctx.root / "src" / dir).string());
  // Through the fixed root, so recorded header paths do not depend on the cache's location.
  flags.push_back("-I" + (ctx.root / "torch" / "include").string());
  flags.push_back("-I" +
                  (ctx.root / "torch" / "include" / "torch" / "csrc" / "api" / "include").string());
  if (ext.cuda()) flags.push_back("-I" + (ctx.root / "cuda" / "include").string());
  flags.push_back("-I" + (ctx.root / "python").string());
  return flags;
}

std::vector<std::string> define_flags(const manifest::Extension& ext) {
  std::vector<std::string> flags;
  for (const auto& m : ext.define_macros) flags.push_back("-D" + m);
  return flags;
}

std::vector<std::string> extension_defines(const NativeContext& ctx,
                                           const manifest::Extension& ext) {
  std::vector<std::string> flags = {
      "-DTORCH_API_INCLUDE_EXTENSION_H",
      "-DTORCH_EXTENSION_NAME=" + ext.name.substr(ext.name.rfind('.') + 1)};
  for (const auto& f : ctx.torch.abi_flags()) flags.push_back(f);
  return flags;
}

}  // namespace

void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

std::string module_path(const std::string& name, const std::string& suffix) {
  std::string p = name;
  std::replace(p.begin(), p.end(), '.', '/');
  return p + suffix;
}

std::vector<std::string> cxx_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                          const std::vector<std::string>& defines,
                                          const std::string& source, const std::string& object) {
  std::vector<std::string> argv = {ctx.cxx.path};
  append(argv, kCommonCxxFlags);
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  append(argv, defines);
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, ext.cxx_flags);
  append(argv, extension_defines(ctx, ext));
  if (!has_std_flag(ext.cxx_flags)) argv.push_back("-std=" + ctx.torch.cxx_std);
  return argv;
}

// fatbinary compresses only large SASS images by default (a 9 MB cubin stays as it is, a 15 MB
// one shrinks 5.6x), so the wheel's size would depend on how the code is split into translation
// units; -compress-all compresses every image, with the default (balanced) mode: the "size" mode
// saves another 30% at about 0.75 CPU-s per MB of SASS, more than a sharded compile saves.
const std::vector<std::string> kFatbinaryFlags = {"-compress-all"};

std::vector<std::string> nvcc_flags(const NativeContext& ctx, const manifest::Extension& ext,
                                    const std::vector<std::string>& defines) {
  std::vector<std::string> argv;
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  append(argv, defines);
  append(argv, kCommonNvccFlags);
  argv.push_back("-Xcompiler");
  argv.push_back("-fPIC");
  // GCC swaps a system header's directory (CCCL comes in through -isystem) for its realpath when
  // that is shorter: the toolkit's install or cache location would end up in line info. Keep the
  // path nvcc was given (through the build root's cuda/ link).
  if (ctx.cxx.version_text.find("clang") == std::string::npos) {
    argv.push_back("-Xcompiler");
    argv.push_back("-fno-canonical-system-headers");
  }
  append(argv, ext.nvcc_flags);
  append(argv, extension_defines(ctx, ext));
  if (!has_std_flag(ext.nvcc_flags)) argv.push_back("-std=" + ctx.torch.nvcc_std);
  argv.push_back("-ccbin");
  argv.push_back(ctx.cxx.path);
  return argv;
}

// nvcc finds its tools and headers relative to the path it is run as: through the build root's
// fixed cuda/ view, the paths it records are the same wherever the toolkit is installed (or
// unpacked into a cache).
std::string nvcc_path(const NativeContext& ctx) {
  return (ctx.root / "cuda" / "bin" / "nvcc").string();
}

std::vector<std::string> nvcc_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                           const std::vector<std::string>& defines,
                                           const std::string& source, const std::string& object,
                                           int threads, const std::string& keep_dir,
                                           const std::vector<std::string>& prefix) {
  std::vector<std::string> argv = prefix;
  argv.push_back(nvcc_path(ctx));
  append(argv, nvcc_flags(ctx, ext, defines));
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, ctx.archs.gencode_flags());
  argv.push_back("-Xfatbin=-compress-all");
  argv.push_back("--threads");
  argv.push_back(std::to_string(threads));
  // Named intermediates instead of tmpxft_<pid>_… ones, whose names end up in the object.
  argv.push_back("--keep");
  argv.push_back("--keep-dir");
  argv.push_back(keep_dir);
  return argv;
}

bool is_cuda_link_library(const std::string& lib) {
  return lib == "cudart" || lib == "c10_cuda" || lib == "torch_cuda";
}

std::vector<std::string> link_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                   const std::vector<std::string>& objects,
                                   const std::string& output) {
  std::vector<std::string> argv = {ctx.cxx.path, "-shared", "-Wl,-O1", "-Wl,--as-needed"};
  append(argv, objects);
  // setuptools' order: the extension's own directories and libraries before cpp_extension's.
  for (const auto& dir : ext.library_dirs) argv.push_back("-L" + (ctx.root / "src" / dir).string());
  argv.push_back("-L" + (ctx.root / "torch" / "lib").string());
  if (ext.cuda()) argv.push_back("-L" + (ctx.root / "cuda" / "lib64").string());
  for (const auto& lib : ext.libraries) argv.push_back("-l" + lib);
  for (const auto& lib : toolchain::torch_link_libraries())
    if (ext.cuda() || !is_cuda_link_library(lib)) argv.push_back("-l" + lib);
  argv.push_back("-o");
  argv.push_back(output);
  append(argv, ext.extra_link_args);
  return argv;
}

}  // namespace kiln::compile
