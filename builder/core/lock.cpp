#include "core/lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln {

Expected<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  KILN_CHECK(ensure_directory(path.parent_path()));
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Error::failed(cat("cannot open lock ", path.string(), ": ", std::strerror(errno)));
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
  int fd = create ? ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)
                  : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
