// A package's build root: where its sources are unpacked, patched and compiled.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "cache/store.h"
#include "core/expected.h"
#include "core/lock.h"

namespace kiln::pipeline {

// /tmp/kiln-build/<first 20 hex digits of the source key>: a path that depends only on the
// package's sources, so compilers record the same paths on every build of the same inputs
// (ARCHITECTURE.md, "Reproducible builds"). /tmp/kiln-build must be a real directory of this
// user, writable by nobody else (kiln creates it so); anything else there is refused, never
// followed. The cache that makes a root records it (<cache>/build-roots/<name>): `kiln cache gc`
// removes only the roots its own cache made.
class BuildRoot {
 public:
  // Waits for the root's lock (another build of the same sources holds it meanwhile), records the
  // root in `store`, and gives it empty. With `keep`, the root outlives this object.
  static Expected<BuildRoot> create(const cache::Store& store, const std::string& source_key, bool keep);
  BuildRoot(BuildRoot&&) noexcept = default;
  BuildRoot& operator=(BuildRoot&&) = delete;
  // Removes the root and its record (unless kept), then lets the lock go.
  ~BuildRoot();

  const std::filesystem::path& path() const { return path_; }
  bool kept() const { return keep_; }
  // The lock's descriptor: compilers inherit it, so a root stays locked while they run.
  int lock_fd() const { return lock_.fd(); }

 private:
  BuildRoot(std::filesystem::path path, std::filesystem::path record, FileLock lock, bool keep)
      : path_(std::move(path)), record_(std::move(record)), lock_(std::move(lock)), keep_(keep) {}
  std::filesystem::path path_;
  std::filesystem::path record_;
  FileLock lock_;
  bool keep_;
};

// The directory every build root lives in (/tmp/kiln-build).
std::filesystem::path build_root_base();

// Removes the build roots that `store` recorded and no build holds the lock of (what killed
// builds left: a live build, and the compilers of a killed one, hold their root's lock). Never
// follows a link; skips (and says so) a root or base that is not a real directory of this user.
// Returns how many roots were removed.
std::uint64_t remove_abandoned_build_roots(const cache::Store& store);

}  // namespace kiln::pipeline
