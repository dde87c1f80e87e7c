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

// glibc's own <dlfcn.h>, then its functions bound to their first x86_64 versions: glibc 2.34
// moved them from libdl into libc under GLIBC_2.34, and links on a newer glibc take that version
// (CCCL 13.2's driver_api.h calls dlopen and dlsym from host code). The old versions are still
// exported, so the module loads on every glibc.
constexpr const char* kDlfcn = R"(/* kiln: <dlfcn.h> with its functions at GLIBC_2.2.5. */
#ifndef KILN_COMPAT_DLFCN_H
#define KILN_COMPAT_DLFCN_H
#include_next <dlfcn.h>
#if defined(__x86_64__) && !defined(__CUDA_ARCH__)
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
#endif
#endif
)";

}  // namespace

Expected<std::filesystem::path> write_compat_headers(const std::filesystem::path& root,
                                                     int floor_minor) {
  if (floor_minor >= kCompatBelow) return std::filesystem::path();
  const std::filesystem::path dir = compat_dir(root);
  KILN_CHECK(ensure_directory(dir / "sys"));
  KILN_CHECK(write_file_atomic(dir / "sys" / "single_threaded.h", kSingleThreaded));
  KILN_CHECK(write_file_atomic(dir / "dlfcn.h", kDlfcn));
  return dir;
}

}  // namespace kiln::compile
