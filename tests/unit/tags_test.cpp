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
  EXPECT_NE(refused.error().message.find("[target] manylinux = \"2_34\""), std::string::npos);
  EXPECT_EQ(at_floor(single.value(), 34).value().tag, "manylinux_2_34_x86_64");
}

TEST(Tags, LocalLabel) {
  EXPECT_EQ(local_label("13.0", "2.11.0+cu130"), "cu130torch2.11");
  EXPECT_EQ(local_label("12.8", "2.10.0"), "cu128torch2.10");
}

}  // namespace kiln::wheel
