#include "manifest/version.h"

#include <gtest/gtest.h>

namespace kiln::manifest {

TEST(Version, Names) {
  EXPECT_TRUE(is_valid_project_name("causal-conv1d"));
  EXPECT_TRUE(is_valid_project_name("fla_core"));
  EXPECT_FALSE(is_valid_project_name("-bad"));
  EXPECT_FALSE(is_valid_project_name("bad name"));
  EXPECT_EQ(normalize_name("Causal__Conv1D"), "causal-conv1d");
  EXPECT_EQ(normalize_name("a.-_b"), "a-b");
  EXPECT_EQ(wheel_name("causal-conv1d"), "causal_conv1d");
}

TEST(Version, Pep440) {
  for (auto v : {"1.6.1", "0.6.0", "1.5.0.post8", "2.0rc1", "1!2.0", "1.0.dev3", "3"})
    EXPECT_TRUE(is_valid_version(v)) << v;
  for (auto v : {"1.6.x", "v1.0", "1.0-1", "01.2", "", "1.0+local"})
    EXPECT_FALSE(is_valid_version(v)) << v;
}

TEST(Version, Ordering) {
  EXPECT_LT(compare_versions("1.6.1", "1.7.0"), 0);
  EXPECT_LT(compare_versions("1.6.2", "1.6.10"), 0);
  EXPECT_EQ(compare_versions("1.0", "1.0.0"), 0);
  EXPECT_LT(compare_versions("1.0rc1", "1.0"), 0);
  EXPECT_LT(compare_versions("1.0", "1.0.post1"), 0);
  EXPECT_LT(compare_versions("1.0.dev1", "1.0a1"), 0);
  EXPECT_LT(compare_versions("1.5.3.post1", "1.6.0"), 0);
}

TEST(Version, SpecifiersAndRequirements) {
  EXPECT_TRUE(is_valid_specifier_set(">=3.9"));
  EXPECT_TRUE(is_valid_specifier_set(">=3.9, <4"));
  EXPECT_TRUE(is_valid_specifier_set("==2.11.*"));
  EXPECT_FALSE(is_valid_specifier_set("3.9"));
  EXPECT_FALSE(is_valid_specifier_set(">=three"));
  EXPECT_TRUE(is_valid_requirement("einops"));
  EXPECT_TRUE(is_valid_requirement("transformers>=5.6.2,<6"));
  EXPECT_TRUE(is_valid_requirement("fla-core[cuda]==0.6.0; extra == \"cuda\""));
  EXPECT_FALSE(is_valid_requirement("torch >= banana"));
  EXPECT_FALSE(is_valid_requirement(""));
  EXPECT_EQ(requirement_name("Fla_Core[cuda]==0.6.0"), "fla-core");
}

}  // namespace kiln::manifest
