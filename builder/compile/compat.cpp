#include "compile/compat.h"

#include "core/fs.h"

namespace kiln::compile {

namespace {

// The same include guard as glibc's header, so that one of the two is ever read.
constexpr const char* kSingleThreaded =
    R"(/* kiln: glibc's <sys/single_threaded.h> without its GLIBC_2.32 symbol. */
#ifndef _SYS_SINGLE_THREADED_H
#define _SYS_SINGLE_THREADED_H
static const char __libc_single_threaded __attribute__((__unused__)) = 0;
#endif
)";

}  // namespace

Expected<std::filesystem::path> write_compat_headers(const std::filesystem::path& root,
                                                     int floor_minor) {
  if (floor_minor >= kCompatBelow) return std::filesystem::path();
  const std::filesystem::path dir = compat_dir(root);
  KILN_CHECK(ensure_directory(dir / "sys"));
  KILN_CHECK(write_file_atomic(dir / "sys" / "single_threaded.h", kSingleThreaded));
  return dir;
}

}  // namespace kiln::compile
