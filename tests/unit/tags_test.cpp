#include "wheel/tags.h"

#include <gtest/gtest.h>

namespace kiln::wheel {

namespace {
elf::ElfInfo needs(std::vector<std::pair<std::string, std::string>> v) {
  elf::ElfInfo info;
  for (auto& [file, version] : v) info.version_needs.push_back({file, version});
  return info;
}
}  // namespace

TEST(Tags, ManylinuxFollowsTheNewestNeededVersion) {
  EXPECT_EQ(manylinux_tag({needs({{"libc.so.6", "GLIBC_2.2.5"}})}).value().tag,
            "manylinux_2_5_x86_64");
  auto t =
      manylinux_tag({needs({{"libc.so.6", "GLIBC_2.14"}, {"libstdc++.so.6", "GLIBCXX_3.4.21"}}),
                     needs({{"libc.so.6", "GLIBC_2.32"}})})
          .value();
  EXPECT_EQ(t.tag, "manylinux_2_34_x86_64");  // 2.32 is in no policy before 2_34
  EXPECT_EQ(t.limiting, "GLIBC_2.32");
  // GLIBCXX can raise the level above glibc's: 3.4.30 needs manylinux_2_35.
  EXPECT_EQ(
      manylinux_tag({needs({{"libc.so.6", "GLIBC_2.17"}, {"libstdc++.so.6", "GLIBCXX_3.4.30"}})})
          .value()
          .tag,
      "manylinux_2_35_x86_64");
  EXPECT_EQ(
      manylinux_tag({needs({{"libc.so.6", "GLIBC_2.28"}, {"libstdc++.so.6", "CXXABI_1.3.11"}})})
          .value()
          .tag,
      "manylinux_2_28_x86_64");
  EXPECT_FALSE(manylinux_tag({needs({{"libc.so.6", "GLIBC_2.99"}})}));
  // Versions of other libraries do not count.
  EXPECT_EQ(manylinux_tag({needs({{"libcudart.so.13", "libcudart.so.13"}})}).value().tag,
            "manylinux_2_5_x86_64");
}

// A wheel is tagged with its target's floor when its files need no newer glibc; else the build
// fails, naming the symbol and the key that would raise the floor.
TEST(Tags, AtFloor) {
  auto needed =
      manylinux_tag({needs({{"libc.so.6", "GLIBC_2.17"}, {"libstdc++.so.6", "GLIBCXX_3.4.21"}})});
  auto at = at_floor(needed.value(), 28);
  ASSERT_TRUE(at) << at.error().message;
  EXPECT_EQ(at->tag, "manylinux_2_28_x86_64");
  EXPECT_EQ(at->needs, "manylinux_2_24_x86_64");  // GLIBCXX_3.4.21
  auto single = manylinux_tag({needs({{"libc.so.6", "GLIBC_2.32"}})});
  EXPECT_EQ(single.value().tag, "manylinux_2_34_x86_64");
  auto refused = at_floor(single.value(), 28);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("need manylinux_2_34_x86_64 (GLIBC_2.32), newer than the "
                                         "target's floor manylinux_2_28_x86_64"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().detail.find("[target] manylinux = \"2_34\""), std::string::npos);
  EXPECT_EQ(at_floor(single.value(), 34).value().tag, "manylinux_2_34_x86_64");
}

// The floor error names each symbol above the floor with its version and the file that needs it,
// and says what to do (the fast-hadamard-transform case: std::log2 in host code, log2@GLIBC_2.29).
TEST(Tags, AtFloorNamesSymbolsVersionsAndFiles) {
  elf::ElfInfo module = needs({{"libm.so.6", "GLIBC_2.29"}, {"libc.so.6", "GLIBC_2.2.5"}});
  module.dynamic_symbols = {{"log2", "GLIBC_2.29"},   {"exp", "GLIBC_2.29"},
                            {"memcpy", "GLIBC_2.14"}, {"sin", "GLIBC_2.2.5"},
                            {"own", "", true},        {"new_but_defined", "GLIBC_2.34", true}};
  const std::vector<std::string> names = {"fht/_C.cpython-312-x86_64-linux-gnu.so"};
  auto symbols = symbols_above_floor({module}, names, 28);
  EXPECT_EQ(symbols, (std::vector<std::string>{
                         "exp@GLIBC_2.29 (in fht/_C.cpython-312-x86_64-linux-gnu.so)",
                         "log2@GLIBC_2.29 (in fht/_C.cpython-312-x86_64-linux-gnu.so)"}));
  EXPECT_TRUE(symbols_above_floor({module}, names, 31).empty());
  auto refused = at_floor(manylinux_tag({module}).value(), 28, symbols);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("(GLIBC_2.29), newer than the target's floor "
                                         "manylinux_2_28_x86_64"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find(
                ": exp@GLIBC_2.29 (in fht/_C.cpython-312-x86_64-linux-gnu.so), log2@GLIBC_2.29"),
            std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().detail.find("--keep-build-root"), std::string::npos);
  EXPECT_NE(refused.error().detail.find("[target] manylinux = \"2_31\""), std::string::npos)
      << refused.error().detail;
}

TEST(Tags, LocalLabel) {
  EXPECT_EQ(local_label("13.0", "2.11.0+cu130"), "cu130torch2.11");
  EXPECT_EQ(local_label("12.8", "2.10.0"), "cu128torch2.10");
}

}  // namespace kiln::wheel
