// The setuptools backend: the package's own (patched) build, run by pip in a pinned environment
// (a virtual environment with the target's Python, the pinned tools and the target's torch), for
// exactly the target's archs (TORCH_CUDA_ARCH_LIST), with no network; the wheel it writes is read
// back into wheel entries for kiln's own wheel writer.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compile/backend.h"
#include "compile/jobs.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/manifest.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "wheel/writer.h"

namespace kiln::compile {

// A build environment, made once per identity and reused.
struct BuildEnvSpec {
  std::string interpreter;                    // the target's Python: the environment's base
  std::filesystem::path pip;                  // pip's wheel file: it runs the installation
  std::vector<std::filesystem::path> wheels;  // installed with --no-deps from these files only
  std::filesystem::path torch_site;  // a torch of another environment: its site-packages (a .pth)
  std::string identity;              // written into the environment as kiln-env.json
  std::string identity_sha256;       // names it: <cache>/envs/setuptools-<identity_sha256[0:16]>
};

// The environment's directory, made first unless it is there (Store::ensure: under its lock, in
// staging, renamed into place when complete, so a half-made one is never used). It must import
// torch.
Expected<std::filesystem::path> ensure_build_env(const BuildEnvSpec& spec,
                                                 const cache::Store& store);

// The root (CompileBasics::root) depends only on the package's sources and holds src/ (the patched
// tree); the environment is reached through <root>/env, so recorded paths are fixed.
struct SetuptoolsContext : CompileBasics {
  std::filesystem::path env;         // the environment's directory (ensure_build_env)
  std::filesystem::path torch_root;  // the torch package directory the build compiles against
};

struct SetuptoolsResult {
  std::vector<wheel::WheelEntry> files;  // the built wheel's files but its .dist-info
  std::vector<std::string> modules;      // those of them that are ELF files
  std::string built_wheel;               // the file name pip's build gave it
  JobStats stats;                        // the compiles ninja recorded (seconds only)
  std::vector<std::string> caveats;  // why its bytes may differ elsewhere (BuildOutput::caveats)
};

// The package's build as one job (pip, which runs its ninja with MAX_JOBS = its weight), and what
// reads the wheel it wrote once it succeeded. stats holds the compiles ninja recorded.
struct SetuptoolsPlan {
  Job job;
  std::function<Expected<SetuptoolsResult>()> finish;
};
Expected<SetuptoolsPlan> plan_setuptools(const SetuptoolsContext& ctx);

// The script the package's build runs as nvcc (PYTORCH_NVCC): `nvcc` with named intermediates,
// in a PID namespace of its own, without the flags that make its output depend on timing. In a
// sandbox (`sandboxed`) where no PID namespace may be made, nvcc runs without and `marker` is
// left.
std::string nvcc_wrapper(const std::filesystem::path& nvcc, bool sandboxed,
                         const std::filesystem::path& marker);

// TORCH_CUDA_ARCH_LIST for these archs; fails for what it cannot say (PTX alone, 'f' variants).
Expected<std::string> torch_cuda_arch_list(const manifest::ArchList& archs);

// The (output, seconds) of each step in a .ninja_log, the last run of each output.
std::vector<std::pair<std::string, double>> parse_ninja_log(const std::string& text);

}  // namespace kiln::compile
