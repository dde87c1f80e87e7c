#include "rebuild/host.h"

#include <gtest/gtest.h>

namespace kiln::rebuild {

namespace {

using json = nlohmann::json;

toolchain::Toolchain host() {
  toolchain::Toolchain tc;
  tc.host = {"GNU ld (GNU Binutils for Debian) 2.40", "2.36", std::string(64, 'a')};
  return tc;
}

// A wheel built on host().
wheel::Provenance built_here() {
  toolchain::Toolchain tc = host();
  wheel::Provenance p;
  p.format = 2;
  p.tools = wheel::BuiltTools{"nvcc text",   "g++ text",          "3.11.7", {}, tc.host.ld,
                              tc.host.glibc, tc.host.cuda_include};
  return p;
}

json inputs(const std::string& nvcc_build) {
  return {{"recipe", 6},
          {"package", {{"name", "demo"}, {"patches", json::array({"a.patch", "b.patch"})}}},
          {"toolchain",
           {{"cuda",
             {{"version", "13.0"},
              {"nvcc_version",
               "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, "
               "V13.0.88\nBuild cuda_13.0.r13.0/compiler." +
                   nvcc_build + "\n"}}},
            {"python", {{"abi_tag", "cp311"}}}}}};
}

}  // namespace

TEST(RebuildHost, TheSameHostHasNoDifference) {
  EXPECT_TRUE(host_differences(built_here(), host()).empty());
  wheel::Provenance pure;  // no tools: nothing to compare
  EXPECT_TRUE(host_differences(pure, host()).empty());
  EXPECT_TRUE(input_differences(inputs("36424714_0"), inputs("36424714_0")).empty());
}

TEST(RebuildHost, EachDifferingInputIsNamedByItsPathWithTheLineThatDiffers) {
  json here = inputs("99999999_0");
  here["toolchain"]["python"]["abi_tag"] = "cp312";
  here["package"]["patches"][1] = "c.patch";
  here["shards"] = {{"x/y.cu", 2}};
  auto diffs = input_differences(inputs("36424714_0"), here);
  ASSERT_EQ(diffs.size(), 4u);
  EXPECT_EQ(describe(diffs[0]), "inputs.package.patches[1]: the wheel's 'b.patch', here 'c.patch'");
  EXPECT_EQ(describe(diffs[1]),
            "inputs.toolchain.cuda.nvcc_version: the wheel's "
            "'Build cuda_13.0.r13.0/compiler.36424714_0', here "
            "'Build cuda_13.0.r13.0/compiler.99999999_0'");
  EXPECT_EQ(describe(diffs[2]),
            "inputs.toolchain.python.abi_tag: the wheel's 'cp311', here 'cp312'");
  EXPECT_EQ(describe(diffs[3]), "inputs.shards: the wheel's '(absent)', here '{\"x/y.cu\":2}'");
  // Bounded: the rest are counted.
  auto few = input_differences(inputs("36424714_0"), here, 2);
  ASSERT_EQ(few.size(), 3u);
  EXPECT_EQ(describe(few[2]), "… and 2 more inputs");
}

TEST(RebuildHost, EachDifferingHostFactIsNamedWithBothValues) {
  toolchain::Toolchain other = host();
  other.host.glibc = "2.39";
  other.host.ld = "GNU ld (GNU Binutils for Ubuntu) 2.42";
  auto diffs = host_differences(built_here(), other);
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(describe(diffs[0]),
            "ld --version: the wheel's 'GNU ld (GNU Binutils for Debian) 2.40', here "
            "'GNU ld (GNU Binutils for Ubuntu) 2.42'");
  EXPECT_EQ(describe(diffs[1]), "glibc: the wheel's '2.36', here '2.39'");
  // A fact an older wheel does not record is not compared.
  wheel::Provenance old = built_here();
  old.tools->glibc.clear();
  EXPECT_EQ(host_differences(old, other).size(), 1u);
}

}  // namespace kiln::rebuild
