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

TEST(Tags, LocalLabel) {
  EXPECT_EQ(local_label("13.0", "2.11.0+cu130"), "cu130torch2.11");
  EXPECT_EQ(local_label("12.8", "2.10.0"), "cu128torch2.10");
}

}  // namespace kiln::wheel
