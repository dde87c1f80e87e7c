#include "core/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln {
namespace {

// Opens a lock file without following a symlink planted at its name (which would create or lock a
// file outside the tree) and without blocking on a planted FIFO; only a regular file (or, for
// try_acquire without `create`, a directory) is a lock. -1 with errno set otherwise.
int open_lock(const std::filesystem::path& path, bool create) {
  int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (create ? O_RDWR | O_CREAT : O_RDONLY);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return -1;
  struct stat st {};
  bool lockable =
      ::fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || (!create && S_ISDIR(st.st_mode)));
  if (!lockable) {
    ::close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

}  // namespace

Expected<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  KILN_CHECK(ensure_directory(path.parent_path()));
  int fd = open_lock(path, /*create=*/true);
  if (fd < 0) {
    const char* why =
        errno == ELOOP || errno == EINVAL ? "not a regular file" : std::strerror(errno);
    return Error::failed(cat("cannot open lock ", path.string(), ": ", why));
  }
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      int err = errno;
      ::close(fd);
      return Error::failed(cat("cannot lock ", path.string(), ": ", std::strerror(err)));
    }
  }
  return FileLock(fd);
}

std::optional<FileLock> FileLock::try_acquire(const std::filesystem::path& path, bool create) {
  int fd = open_lock(path, create);
  if (fd < 0) return std::nullopt;
  int rc;
  do {
    rc = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ::close(fd);
    return std::nullopt;
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

}  // namespace kiln
