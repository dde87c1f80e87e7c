// Headers of kiln's own, first on every host compile's include path, that keep symbols newer than
// a target's manylinux floor out of the objects: a wheel then installs wherever its torch does.
#pragma once

#include <filesystem>

#include "core/expected.h"

namespace kiln::compile {

// Floors below glibc 2.<kCompatBelow> get the headers; those below 2.<kMathCompatBelow> libm's too.
constexpr int kCompatBelow = 32;
constexpr int kMathCompatBelow = 29;

// The directory the headers are in, first on the include path of a floor that needs them.
inline std::filesystem::path compat_dir(const std::filesystem::path& root) {
  return root / "compat";
}

// Writes the headers a floor of glibc 2.<floor_minor> needs into <root>/compat and returns that
// directory, or an empty path when the floor needs none (glibc >= 2.32).
//
// g++'s libstdc++ (>= 11) includes <sys/single_threaded.h> when the system has it (glibc >= 2.32)
// and reads __libc_single_threaded@GLIBC_2.32 on every reference-count update: the one symbol that
// made kiln's wheels manylinux_2_34 where the rest needs 2.17. kiln's header of that name declares
// no such symbol: the process is taken to be multi-threaded, so libstdc++ always takes its atomic
// path, as it does on glibc < 2.32. kiln's <dlfcn.h> binds dlopen, dlsym, dlclose, dlerror and
// dladdr to GLIBC_2.2.5 (a link on glibc >= 2.34 would take GLIBC_2.34); an object that calls
// none of them is unchanged by it (a .symver of an unreferenced symbol emits nothing), and one that
// calls them failed its floor before, so no committed wheel changed. Below glibc 2.29, kiln's
// <math.h> and <cmath> bind libm's exp, exp2, log, log2 and pow to GLIBC_2.2.5 the same way (their
// GLIBC_2.29 versions made std::log2 in host code need manylinux_2_31). The headers' text is part
// of the recipe (resolve::kRecipeVersion): changing it changes objects their keys cannot see.
Expected<std::filesystem::path> write_compat_headers(const std::filesystem::path& root,
                                                     int floor_minor);

}  // namespace kiln::compile
