// An exclusive advisory lock (flock) on a lock file, held until destroyed.
#pragma once

#include <filesystem>
#include <optional>
#include <utility>

#include "core/expected.h"

namespace kiln {

class FileLock {
 public:
  // Creates the file (and its directory) when missing and blocks until this process holds it.
  static Expected<FileLock> acquire(const std::filesystem::path& path);
  // Without waiting: the lock when no other process holds it; nullopt when one does, or when the
  // path (a file or a directory) does not exist and `create` is false.
  static std::optional<FileLock> try_acquire(const std::filesystem::path& path,
                                             bool create = false);
  // Wraps a descriptor already locked with flock (closed when this dies).
  static FileLock adopt(int fd) { return FileLock(fd); }
  // The locked descriptor: a child process given it (ProcessSpec::inherit_fds) holds the lock too,
  // until it and this object have both let go.
  int fd() const { return fd_; }
  FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace kiln
