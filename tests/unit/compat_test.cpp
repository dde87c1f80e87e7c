#include "compile/compat.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "core/process.h"
#include "elf/elf.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// The version of `name` a shared object built from `source` with the compat headers references.
std::string version_of(const fs::path& dir, const fs::path& compat, const std::string& source,
                       const std::string& name) {
  write_file_atomic(dir / "m.cpp", source).value();
  std::vector<std::string> argv = {"g++", "-O2", "-fPIC", "-shared"};
  if (!compat.empty()) argv.push_back("-I" + compat.string());
  for (const auto& a : {(dir / "m.cpp").string(), std::string("-o"), (dir / "m.so").string()})
    argv.push_back(a);
  run_capture(argv).value();
  elf::ElfInfo info = elf::read_elf_file(dir / "m.so").value();
  for (const auto& s : info.dynamic_symbols)
    if (s.name == name && !s.defined) return s.version;
  return "(none)";
}

}  // namespace

// std::log2 and friends in host code: GLIBC_2.29 from this glibc, GLIBC_2.2.5 with kiln's headers
// below a 2.29 floor (through <cmath> and <math.h> alike); nothing changes at 2.29 and above.
TEST(Compat, LibmBoundBelowGlibc229) {
  auto tmp = TempDir::create(fs::temp_directory_path(), "kiln-compat-").value();
  const std::string cxx =
      "#include <cmath>\nextern \"C\" double f(double x) { return std::log2(x) + std::pow(x, "
      "0.5); }\n";
  const std::string c = "#include <math.h>\nextern \"C\" double g(double x) { return exp(x); }\n";
  EXPECT_EQ(version_of(tmp.path(), "", cxx, "log2"), "GLIBC_2.29");
  fs::path at28 = write_compat_headers(tmp.path() / "r28", 28).value();
  EXPECT_EQ(version_of(tmp.path(), at28, cxx, "log2"), "GLIBC_2.2.5");
  EXPECT_EQ(version_of(tmp.path(), at28, cxx, "pow"), "GLIBC_2.2.5");
  EXPECT_EQ(version_of(tmp.path(), at28, c, "exp"), "GLIBC_2.2.5");
  fs::path at31 = write_compat_headers(tmp.path() / "r31", 31).value();
  EXPECT_FALSE(fs::exists(at31 / "cmath"));
  EXPECT_EQ(version_of(tmp.path(), at31, cxx, "log2"), "GLIBC_2.29");
  EXPECT_EQ(write_compat_headers(tmp.path() / "r34", 34).value(), fs::path());
}

}  // namespace kiln::compile
