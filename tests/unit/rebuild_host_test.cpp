#include "rebuild/host.h"

#include <gtest/gtest.h>

namespace kiln::rebuild {

namespace {

const char* kNvcc130 =
    "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    "Build cuda_13.0.r13.0/compiler.36424714_0\n";

toolchain::Toolchain host() {
  toolchain::Toolchain tc;
  tc.cuda.version_text = kNvcc130;
  tc.cxx.command = "g++";
  tc.cxx.version_text = "g++ (Debian 12.2.0-14+deb12u1) 12.2.0";
  tc.python.version = "3.11.7";
  tc.python.abi_tag = "cp311";
  tc.host = {"GNU ld (GNU Binutils for Debian) 2.40", "2.36", std::string(64, 'a')};
  return tc;
}

// A wheel built on host().
wheel::Provenance built_here() {
  toolchain::Toolchain tc = host();
  wheel::Provenance p;
  p.format = 2;
  p.tools = wheel::BuiltTools{tc.cuda.version_text, tc.cxx.version_text, tc.python.version, {},
                              tc.host.ld, tc.host.glibc, tc.host.cuda_include};
  p.facts.python = wheel::InputFacts::Python{"cp311", ".cpython-311-x86_64-linux-gnu.so"};
  return p;
}

}  // namespace

TEST(RebuildHost, TheSameHostHasNoDifference) {
  EXPECT_TRUE(host_differences(built_here(), host()).empty());
  wheel::Provenance pure;  // no tools: nothing to compare
  EXPECT_TRUE(host_differences(pure, host()).empty());
}

TEST(RebuildHost, EachDifferingFactIsNamedWithBothValues) {
  toolchain::Toolchain other = host();
  other.cuda.version_text =
      "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
      "Build cuda_13.0.r13.0/compiler.99999999_0\n";
  other.host.glibc = "2.39";
  other.python.abi_tag = "cp312";
  auto diffs = host_differences(built_here(), other);
  ASSERT_EQ(diffs.size(), 3u);
  EXPECT_EQ(describe(diffs[0]),
            "nvcc --version: the wheel's 'Build cuda_13.0.r13.0/compiler.36424714_0', here "
            "'Build cuda_13.0.r13.0/compiler.99999999_0'");
  EXPECT_EQ(describe(diffs[1]), "glibc: the wheel's '2.36', here '2.39'");
  EXPECT_EQ(diffs[2].input, "Python ABI");
  // A fact an older wheel does not record is not compared.
  wheel::Provenance old = built_here();
  old.tools->glibc.clear();
  EXPECT_EQ(host_differences(old, other).size(), 2u);
}

}  // namespace kiln::rebuild
