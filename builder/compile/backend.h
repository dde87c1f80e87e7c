// One interface for the three backends (native, setuptools, pure): a request in, the wheel's files
// out. The pipeline prepares what every backend shares (the build root with the patched tree, the
// target's toolchain) and finishes the wheel; a backend only builds.
#pragma once

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "compile/jobs.h"
#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/manifest.h"
#include "toolchain/toolchain.h"
#include "wheel/writer.h"

namespace kiln::compile {

struct BuildRequest {
  const manifest::Manifest* manifest = nullptr;
  // The build root: a directory whose path depends only on the package's sources, holding src/
  // (the patched tree), so the paths compilers record are the same on every build.
  std::filesystem::path root;
  const toolchain::Toolchain* toolchain = nullptr;  // null for pure packages
  manifest::ArchList archs;
  int jobs = 0;                         // 0: one per core
  const cache::Store* cache = nullptr;  // the object cache (native)
  std::string object_salt;              // identities the objects depend on beyond their argv
  // Shard counts chosen by resolve (part of the build key): "<extension>/<source>" -> n.
  std::map<std::string, int> shards;
  // The build root's lock, inherited by every compiler so that an orphaned job keeps it locked.
  int root_lock_fd = -1;
  std::filesystem::path env;  // the setuptools backend's environment (ensure_build_env)
  int manylinux = 28;         // the glibc minor of the wheel's floor (compat.h)
};

struct BuildOutput {
  std::vector<wheel::WheelEntry> files;  // everything the wheel ships but its .dist-info
  std::vector<std::string> modules;      // the wheel paths of those that are extension modules
  JobStats stats;
  std::size_t objects_reused = 0;
  std::string built_wheel;  // setuptools: the file name the package's own build gave its wheel
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Expected<BuildOutput> build(const BuildRequest& request) const = 0;
  // Whether it compiles (needs BuildRequest::toolchain): native and setuptools; pure does not.
  virtual bool compiles() const { return true; }
  // What it cannot build for these archs, known before any source is fetched.
  virtual Expected<void> check_archs(const manifest::ArchList&) const { return {}; }
  // Whether build() needs BuildRequest::env: a pinned environment the pipeline prepares.
  virtual bool needs_build_env() const { return false; }
};

// One per file: native.cpp, setuptools.cpp, pure.cpp.
std::unique_ptr<Backend> native_backend();
std::unique_ptr<Backend> setuptools_backend();
std::unique_ptr<Backend> pure_backend();
std::unique_ptr<Backend> make_backend(manifest::Backend kind);

}  // namespace kiln::compile
