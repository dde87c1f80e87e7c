#include "cache/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::cache {

Expected<DirLock> DirLock::acquire(const std::filesystem::path& dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    KILN_CHECK(ensure_directory(dir));
    // O_NOFOLLOW: a link planted at `dir` (to a directory elsewhere) is refused, not locked and
    // then written through.
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) continue;  // removed between the two calls
      const char* why = errno == ELOOP || errno == ENOTDIR ? "it is a symbolic link or no directory"
                                                           : std::strerror(errno);
      return Error::failed(cat("cannot open directory ", dir.string(), ": ", why));
    }
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      return Error::failed(cat("cannot lock ", dir.string(), ": ", why));
    }
    // The directory may have been removed (and perhaps made again, or replaced by a link) while
    // we waited.
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) == 0 && ::lstat(dir.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      return DirLock(FileLock::adopt(fd));
    ::close(fd);
  }
  return Error::failed(cat("cannot lock ", dir.string(), ": it keeps disappearing"));
}

}  // namespace kiln::cache
