// Exclusive advisory locks (flock) on cache directories, so two kiln processes (or threads) never
// write one download or one git mirror at the same time.
#pragma once

#include <filesystem>
#include <utility>

#include "core/expected.h"
#include "core/lock.h"

namespace kiln::cache {

class DirLock {
 public:
  // Creates `dir` when missing and waits for its lock. Should another process remove the
  // directory meanwhile, the lock is taken on the new one. A symlink at `dir` is refused, never
  // followed (as core's FileLock refuses one at a lock file): the lock and what it guards stay in
  // the cache.
  static Expected<DirLock> acquire(const std::filesystem::path& dir);

 private:
  explicit DirLock(FileLock lock) : lock_(std::move(lock)) {}
  FileLock lock_;  // on the directory's own descriptor; closing it releases the lock
};

}  // namespace kiln::cache
