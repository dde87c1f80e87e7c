// Exclusive advisory locks (flock) on cache directories, so two kiln processes (or threads) never
// write one download or one git mirror at the same time.
#pragma once

#include <filesystem>
#include <utility>

#include "core/expected.h"

namespace kiln::fetch {

class DirLock {
 public:
  // Creates `dir` when missing and waits for its lock. Should another process remove the
  // directory meanwhile, the lock is taken on the new one.
  static Expected<DirLock> acquire(const std::filesystem::path& dir);
  DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  DirLock& operator=(DirLock&&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kiln::fetch
