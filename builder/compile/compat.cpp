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

// libm's exp, exp2, log, log2 and pow got new versions in glibc 2.29 (GLIBC_2.29: the same
// results without the old SVID error handling), and a link on a newer glibc takes them: std::log2
// in host code made a module need manylinux_2_31. Bound to the first x86_64 versions, which every
// glibc still exports. One header, included by kiln's <math.h> and <cmath> (C++'s <cmath> reaches
// glibc's <math.h> through #include_next, past the include path's first entries).
constexpr const char* kMathSymver =
    R"(/* kiln: libm's functions of GLIBC_2.29 bound to GLIBC_2.2.5. */
#ifndef KILN_COMPAT_MATH_SYMVER_H
#define KILN_COMPAT_MATH_SYMVER_H
#if defined(__x86_64__) && !defined(__CUDA_ARCH__)
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver exp2,exp2@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver log2,log2@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
#endif
#endif
)";

constexpr const char* kMath = R"(/* kiln: <math.h>, then kiln_math_symver.h. */
#ifndef KILN_COMPAT_MATH_H
#define KILN_COMPAT_MATH_H
#include_next <math.h>
#include "kiln_math_symver.h"
#endif
)";

constexpr const char* kCmath = R"(/* kiln: <cmath>, then kiln_math_symver.h. */
#ifndef KILN_COMPAT_CMATH
#define KILN_COMPAT_CMATH
#include_next <cmath>
#include "kiln_math_symver.h"
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
  if (floor_minor < kMathCompatBelow) {
    KILN_CHECK(write_file_atomic(dir / "kiln_math_symver.h", kMathSymver));
    KILN_CHECK(write_file_atomic(dir / "math.h", kMath));
    KILN_CHECK(write_file_atomic(dir / "cmath", kCmath));
  }
  return dir;
}

}  // namespace kiln::compile
