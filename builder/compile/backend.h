// One interface for the backends (native, setuptools, pure): a request in, the wheel's files out.
// The pipeline prepares what every backend shares (the build root with the patched tree, the
// target's toolchain) and finishes the wheel; a backend only builds.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cache/store.h"
#include "compile/jobs.h"
#include "compile/sandbox.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/backend.h"
#include "manifest/build_env.h"
#include "manifest/manifest.h"
#include "toolchain/toolchain.h"
#include "wheel/provenance.h"
#include "wheel/writer.h"

namespace kiln::compile {

// What every backend is given, then what only one backend is: each reads its own part.
struct BuildRequest {
  const manifest::Manifest* manifest = nullptr;
  // The build root: a directory whose path depends only on the package's sources, holding src/
  // (the patched tree), so the paths compilers record are the same on every build.
  std::filesystem::path root;
  const toolchain::Toolchain* toolchain = nullptr;  // null for pure packages
  manifest::ArchList archs;
  int jobs = 0;        // 0: one per core
  int manylinux = 28;  // the glibc minor of the wheel's floor (compat.h)
  // The build root's lock, inherited by every compiler so that an orphaned job keeps it locked.
  int root_lock_fd = -1;
  // `kiln rebuild`: every job compiled, no object taken from the cache or stored in it.
  bool fresh = false;
  struct Native {
    const cache::Store* cache = nullptr;  // the object cache (none: NoObjectCache)
    std::string object_salt;              // identities the objects depend on beyond their argv
    // Shard counts chosen by resolve (part of the build key): "<extension>/<source>" -> n.
    std::map<std::string, int> shards;
  } native;
  struct Setuptools {
    std::filesystem::path env;  // the pinned environment (ensure_build_env)
  } setuptools;
  SandboxMode sandbox = SandboxMode::Auto;  // where the package's code runs (compile/sandbox.h)
};

// What the compiling backends take from every request: the package, its build root, the
// toolchain's Python, CUDA and C++ compiler, the archs, the parallelism and the glibc floor.
struct CompileBasics {
  const manifest::Manifest* manifest = nullptr;
  std::filesystem::path root;
  toolchain::PythonInfo python;
  toolchain::CudaToolkit cuda;
  toolchain::HostCompiler cxx;
  manifest::ArchList archs;
  int jobs = 0;        // 0: one per core
  int manylinux = 28;  // the glibc minor of the wheel's floor (compat.h)
  SandboxMode sandbox = SandboxMode::Auto;
};
CompileBasics compile_basics(const BuildRequest& request);  // request.toolchain must be set

struct BuildOutput {
  std::vector<wheel::WheelEntry> files;  // everything the wheel ships but its .dist-info
  std::vector<std::string> modules;      // the wheel paths of those that are extension modules
  JobStats stats;
  std::size_t objects_reused = 0;
  // The backend's own section of kiln.json (setuptools: the wheel its package's build made and
  // the TORCH_CUDA_ARCH_LIST it was given).
  std::optional<wheel::SetuptoolsBuild> setuptools;
  // Why this build's bytes may differ from the same build's elsewhere (nvcc outside a PID
  // namespace): empty when they may not.
  std::vector<std::string> caveats;
};

// What a backend's prepare() may use besides the request: the target, its pins for a build
// environment, the cache, what the plan chose for the item (shard counts, the objects' salt), and
// a way to get a pinned wheel into the download cache. Each backend takes what it needs into its
// part of the request.
struct Preparation {
  const manifest::Target* target = nullptr;
  const manifest::BuildEnvPins* build_env = nullptr;
  const cache::Store* store = nullptr;
  std::map<std::string, int> shards;
  std::string object_salt;
  std::function<Expected<std::filesystem::path>(const manifest::PinnedWheel&)> fetch;
};

// A backend's build as jobs for the plan's one pool (ninja's Plan for one package): its jobs
// (their deps index `jobs`), and what makes its output once every one has succeeded. It holds
// what the jobs use while they run (the object cache, the root lent to the sandbox) until it is
// destroyed.
struct PlannedBuild {
  std::vector<Job> jobs;
  std::function<Expected<BuildOutput>()> finish;
  // Set when a job that only restores found its entry gone: nothing planned makes that output,
  // so the build is planned again.
  std::shared_ptr<bool> stale = std::make_shared<bool>(false);
};

class Backend {
 public:
  virtual ~Backend() = default;
  // What it is (whether it compiles and needs BuildRequest::toolchain, whether it needs
  // BuildRequest::env) is its row in manifest/backend.h.
  // Before build(): what it needs beyond the build root and the toolchain, into its part of
  // `request` (setuptools: its pinned environment, made once per identity in the cache).
  virtual Expected<void> prepare(const Preparation&, BuildRequest&) const { return {}; }
  // Everything up to the jobs (the build root's views, nvcc's dry runs, the environment), then the
  // jobs and the finish.
  virtual Expected<PlannedBuild> plan(const BuildRequest& request) const = 0;
  // What it cannot build for these archs, known before any source is fetched.
  virtual Expected<void> check_archs(const manifest::ArchList&) const { return {}; }
};

// One package alone: planned, its jobs run in request.jobs slots, finished; planned again (at most
// twice) when stale. BuildOutput::stats holds its jobs' run.
Expected<BuildOutput> build_alone(const Backend& backend, const BuildRequest& request);

// One per file: native.cpp, setuptools.cpp, pure.cpp.
std::unique_ptr<Backend> native_backend();
std::unique_ptr<Backend> setuptools_backend();
std::unique_ptr<Backend> pure_backend();

// Each backend's build, under the name of its row in manifest/backend.h.
struct Implementation {
  std::string_view name;
  std::unique_ptr<Backend> (*make)();
};
// The shipped backends' (a test passes its own table).
std::span<const Implementation> implementations();
// The build of `spec`'s backend from `table`; an error when the table has none of that name.
Expected<std::unique_ptr<Backend>> make_backend(
    const manifest::BackendSpec& spec, std::span<const Implementation> table = implementations());

}  // namespace kiln::compile
