// An exclusive advisory lock (flock) on a lock file, held until destroyed.
#pragma once

#include <filesystem>
#include <utility>

#include "core/expected.h"

namespace kiln {

class FileLock {
 public:
  // Creates the file (and its directory) when missing and blocks until this process holds it.
  static Expected<FileLock> acquire(const std::filesystem::path& path);
  FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kiln
