// kiln's fuzz targets. Each file defines one target with KILN_FUZZ_TARGET(name) { ... }, a function
// of (data, size) that must neither crash nor break the invariants it checks (fuzz::fail).
//
// Built with -DKILN_FUZZ=ON (clang, libFuzzer; tests/fuzz/CMakeLists.txt), each file becomes the
// fuzzer `fuzz_<name>`; compiled into the unit tests (g++), every target registers itself and
// tests/unit/fuzz_corpus_test.cpp runs it on each file of tests/fuzz/corpus/<name>/, so crashers
// kept there stay regression tests in every build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <system_error>

namespace kiln::fuzz {

using TargetFn = int (*)(const std::uint8_t* data, std::size_t size);

inline std::map<std::string, TargetFn>& registry() {
  static std::map<std::string, TargetFn> targets;
  return targets;
}

struct Registration {
  Registration(const char* name, TargetFn fn) { registry()[name] = fn; }
};

// An invariant broke: say which, and abort (libFuzzer keeps the input as a crash).
[[noreturn]] inline void fail(std::string_view what) {
  std::fprintf(stderr, "kiln fuzz invariant broken: %.*s\n", static_cast<int>(what.size()),
               what.data());
  std::abort();
}

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A scratch directory of this process (on /dev/shm when there is one), removed at exit; each
// target asks for its own subdirectory.
inline std::filesystem::path sandbox(std::string_view target) {
  struct Dir {
    std::filesystem::path path;
    Dir() {
      std::error_code ec;
      std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                       ? std::filesystem::path("/dev/shm")
                                       : std::filesystem::temp_directory_path();
      std::string templ = (base / "kiln-fuzz-XXXXXX").string();
      if (::mkdtemp(templ.data()) == nullptr) fail("cannot create the sandbox directory");
      path = templ;
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static Dir dir;
  std::filesystem::path path = dir.path / target;
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  return path;
}

}  // namespace kiln::fuzz

#ifdef KILN_LIBFUZZER
#define KILN_FUZZ_TARGET(name)                                                        \
  static int kiln_fuzz_##name(const std::uint8_t* data, std::size_t size);            \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    return kiln_fuzz_##name(data, size);                                              \
  }                                                                                   \
  static int kiln_fuzz_##name(const std::uint8_t* data, std::size_t size)
#else
#define KILN_FUZZ_TARGET(name)                                                              \
  static int kiln_fuzz_##name(const std::uint8_t* data, std::size_t size);                  \
  static ::kiln::fuzz::Registration kiln_fuzz_registration_##name(#name, kiln_fuzz_##name); \
  static int kiln_fuzz_##name(const std::uint8_t* data, std::size_t size)
#endif
