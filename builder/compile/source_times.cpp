#include "compile/source_times.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/clock.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

Expected<void> fix_mtimes(const fs::path& tree) {
  ::timespec times[2];
  times[0].tv_sec = times[1].tv_sec = kZipEpoch;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    if (::utimensat(AT_FDCWD, it->path().c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      return Error::failed(
          cat("cannot set the time of ", it->path().string(), ": ", std::strerror(errno)));
  }
  if (ec) return Error::failed(cat("cannot list ", tree.string(), ": ", ec.message()));
  return {};
}

}  // namespace kiln::compile
