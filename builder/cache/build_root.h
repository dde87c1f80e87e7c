// A package's build root: where its sources are unpacked, patched and compiled; per-build state
// the cache owns (made, locked and collected here: Store::gc removes the abandoned ones).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "core/expected.h"
#include "core/lock.h"

namespace kiln::cache {

class Store;

// Build roots belong to the cache that makes them: <cache>/build/<first hex digits of the root
// key> (resolve's PlanItem: the package's name alone). Compilers must see them at a path that
// depends on nothing a machine, a user or a run chooses (it ends up in the wheel: __FILE__, line
// info, module ids), and the same path for every build of the package, so that after a patch
// changes one file only that file's units miss the object cache; so kiln builds in a mount
// namespace of its own (a user namespace too when not root) where /tmp/kiln-build is <cache>/build;
// nothing is ever made at /tmp/kiln-build outside it, so no other user can plant anything there.
// Where no such namespace may be made, builds use <cache>/build itself, and kiln says once that
// those wheels embed that path. (ARCHITECTURE.md, "Reproducible builds"; docs/reliability.md,
// "Trust".)
class BuildRoot {
 public:
  // Enters the namespace (once per process), waits for the root's lock (another build of the same
  // package into the same cache holds it meanwhile), and gives the root empty. With `keep`, the
  // root outlives this object.
  static Expected<BuildRoot> create(const Store& store, const std::string& root_key, bool keep);
  BuildRoot(BuildRoot&&) noexcept = default;
  BuildRoot& operator=(BuildRoot&&) = delete;
  // Removes the root (unless kept), then lets the lock go.
  ~BuildRoot();

  // The root as this process and the compilers see it: /tmp/kiln-build/<name>, or
  // <cache>/build/<name> without a namespace.
  const std::filesystem::path& path() const { return path_; }
  // The root where everyone else sees it: <cache>/build/<name>.
  const std::filesystem::path& real_path() const { return real_; }
  // The lock's descriptor: compilers inherit it, so a root stays locked while they run.
  int lock_fd() const { return lock_.fd(); }
  // Empty at /tmp/kiln-build; else why the root is at the cache's own path, which the wheel then
  // embeds (a caveat of the build: pipeline::ItemResult::caveats).
  const std::string& caveat() const { return caveat_; }

 private:
  BuildRoot(std::filesystem::path path, std::filesystem::path real, FileLock lock, bool keep)
      : path_(std::move(path)), real_(std::move(real)), lock_(std::move(lock)), keep_(keep) {}
  std::filesystem::path path_;
  std::filesystem::path real_;
  FileLock lock_;
  bool keep_;
  std::string caveat_;
};

}  // namespace kiln::cache
