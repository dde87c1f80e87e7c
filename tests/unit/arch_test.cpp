#include "manifest/arch.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln::manifest {

namespace {
std::string canon(std::string_view spec) {
  return ArchList::parse(spec).value().canonical();
}
std::string arch_error(std::string_view spec) {
  auto r = ArchList::parse(spec);
  return r ? std::string("<ok>") : r.error().message;
}
}  // namespace

TEST(Arch, TorchStyle) {
  EXPECT_EQ(canon("9.0"), "sm_90");
  EXPECT_EQ(canon("9.0;10.0;12.0+PTX"), "sm_90;sm_100;sm_120+ptx");
  EXPECT_EQ(canon("12.0+PTX 9.0"), "sm_90;sm_120+ptx");  // spaces, any order
  EXPECT_EQ(canon("9.0a"), "sm_90a");
  EXPECT_EQ(canon("Hopper"), "sm_90+ptx");
  EXPECT_EQ(canon("blackwell"), "sm_100;sm_120+ptx");
}

TEST(Arch, CMakeStyle) {
  EXPECT_EQ(canon("90-real;120-virtual"), "sm_90;compute_120");
  EXPECT_EQ(canon("90"), "sm_90+ptx");
  EXPECT_EQ(canon("100a-real"), "sm_100a");
}

TEST(Arch, NvccStyle) {
  EXPECT_EQ(canon("sm_90"), "sm_90");
  EXPECT_EQ(canon("sm_90a"), "sm_90a");
  EXPECT_EQ(canon("compute_90"), "compute_90");
  EXPECT_EQ(canon("sm_90;compute_90"), "sm_90+ptx");  // merged
}

TEST(Arch, CanonicalFormParsesBack) {
  for (auto spec : {"9.0;10.0;12.0+PTX", "compute_90;sm_100a", "Blackwell", "90-real;120"}) {
    auto list = ArchList::parse(spec).value();
    EXPECT_EQ(ArchList::parse(list.canonical()).value(), list) << spec;
  }
  EXPECT_NE(arch_error("sm_120+PTX+PTX"), "<ok>");
}

TEST(Arch, EquivalentSpellingsNormaliseTheSame) {
  EXPECT_EQ(ArchList::parse("9.0").value(), ArchList::parse("sm_90").value());
  EXPECT_EQ(ArchList::parse("9.0").value(), ArchList::parse("90-real").value());
  EXPECT_EQ(ArchList::parse("9.0+PTX").value(), ArchList::parse("90").value());
  EXPECT_EQ(ArchList::parse("compute_90").value(), ArchList::parse("90-virtual").value());
  EXPECT_NE(ArchList::parse("sm_90a").value(), ArchList::parse("sm_90").value());
}

TEST(Arch, Rejects) {
  EXPECT_EQ(arch_error("sm_9"),
            "bad architecture 'sm_9': expected a two- or three-digit architecture number such as "
            "90 or 120");
  EXPECT_EQ(arch_error("12.0+PTX+PTX"),
            "bad architecture '12.0+PTX+PTX': only one '+PTX' may follow an architecture");
  EXPECT_EQ(arch_error("sm_999"), "bad architecture 'sm_999': unknown CUDA architecture 999");
  EXPECT_EQ(arch_error("9.9"), "bad architecture '9.9': unknown CUDA architecture 9.9");
  EXPECT_EQ(
      arch_error("sm_35"),
      "bad architecture 'sm_35': CUDA architecture 35 is older than any CUDA 12 or 13 toolkit "
      "builds (CUDA 12 builds sm_50 and newer, CUDA 13 sm_75 and newer)");
  EXPECT_EQ(arch_error("3.7"),
            "bad architecture '3.7': CUDA architecture 3.7 is older than any CUDA "
            "12 or 13 toolkit builds (CUDA 12 builds sm_50 and newer, CUDA 13 "
            "sm_75 and newer)");
  EXPECT_EQ(arch_error("90-fake"),
            "bad architecture '90-fake': a CMake-style architecture ends in -real or -virtual");
  EXPECT_EQ(arch_error(""), "empty architecture list");
  EXPECT_EQ(arch_error(" ; "), "empty architecture list");
  EXPECT_NE(arch_error("Hoper"), "<ok>");
}

TEST(Arch, ErrorOffsetPointsAtToken) {
  ArchList list;
  ArchSpecError error;
  ASSERT_FALSE(ArchList::parse("9.0;sm_9", list, error));
  EXPECT_EQ(error.offset, 4u);
}

TEST(Arch, Outputs) {
  auto list = ArchList::parse("9.0;12.0+PTX").value();
  EXPECT_EQ(list.torch_arch_list(), "9.0;12.0+PTX");
  EXPECT_EQ(list.slug(), "sm90-sm120-ptx120");
  EXPECT_EQ(list.gencode_flags(),
            (std::vector<std::string>{"-gencode=arch=compute_90,code=sm_90",
                                      "-gencode=arch=compute_120,code=sm_120",
                                      "-gencode=arch=compute_120,code=compute_120"}));
}

}  // namespace kiln::manifest

namespace kiln::manifest {

TEST(ArchToolkit, EachArchNeedsItsFirstReleaseAndCuda13DropsTheOldest) {
  auto problem = [](const char* spec, const char* cuda) {
    return archs_toolkit_problem(ArchList::parse(spec).value(), cuda);
  };
  EXPECT_EQ(problem("9.0+PTX", "12.4"), "");
  EXPECT_EQ(problem("12.0", "12.4"), "sm_120 needs CUDA 12.8 or newer (this toolkit is 12.4)");
  EXPECT_EQ(problem("12.0;12.1", "12.8"), "sm_121 needs CUDA 12.9 or newer (this toolkit is 12.8)");
  EXPECT_EQ(problem("10.0f", "12.8"), "sm_100f needs CUDA 12.9 or newer (this toolkit is 12.8)");
  EXPECT_EQ(problem("9.0a;10.0a", "12.8"), "");
  EXPECT_EQ(problem("7.0", "13.0"),
            "CUDA 13.0 no longer builds sm_70 (CUDA 13 builds sm_75 and newer: use a CUDA 12 "
            "toolkit)");
  EXPECT_EQ(problem("7.0;7.5", "12.4"), "");
  EXPECT_NE(problem("sm_101", "13.0").find("CUDA 13 calls it sm_110"), std::string::npos);
  EXPECT_EQ(problem("sm_110;sm_88", "13.0"), "");
  EXPECT_EQ(problem("sm_110", "12.9"), "sm_110 needs CUDA 13.0 or newer (this toolkit is 12.9)");
  EXPECT_EQ(problem("5.0;12.0", "13.2"),
            "CUDA 13.2 no longer builds sm_50 (CUDA 13 builds sm_75 and newer: use a CUDA 12 "
            "toolkit)");
  EXPECT_NE(problem("9.0", "x").find("cannot tell"), std::string::npos);
}

TEST(Arch, KnownArchNamesParseAsWritten) {
  std::vector<std::string> names = known_arch_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "5.0");
  for (const char* want : {"9.0", "9.0a", "10.0f", "12.0", "12.0a", "12.1"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(std::find(names.begin(), names.end(), "8.0a"), names.end());
  for (const auto& name : names) {
    auto parsed = ArchList::parse(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(parsed->torch_arch_list(), name);
  }
}

}  // namespace kiln::manifest
