#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../support/expect.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

namespace kiln::packaging {

namespace {

Version v(const std::string& text) {
  auto parsed = Version::parse(text);
  EXPECT_TRUE(parsed) << text;
  return parsed.value_or(Version());
}

}  // namespace

TEST(PackagingVersion, ParsesAnySpellingOfAVersion) {
  EXPECT_EQ(v("v1.7-RC1").str(), "1.7rc1");
  EXPECT_EQ(v("1.0-1").str(), "1.0.post1");
  EXPECT_EQ(v("1.0.alpha.2.rev3-dev").str(), "1.0a2.post3.dev0");
  EXPECT_EQ(v(" 00!01.002.POST ").str(), "1.2.post0");
  EXPECT_EQ(v("1!1.0c1").str(), "1!1.0rc1");
  for (const char* bad :
       {"", " ", "1.", "1..2", "x1", "1.0+", "1.0+a..b", "1.0 1", "1.0rc1rc2", "1.0-", "1.0+a-"})
    EXPECT_FALSE(Version::parse(bad)) << bad;
}

// Where the copies this module replaced read a version otherwise than packaging 26.4 does.
TEST(PackagingVersion, WhatTheOldParsersGotWrong) {
  // parse_pep440 (manifest/specifier.cpp) left an implicit number's separator unread...
  EXPECT_EQ(v("1.0a.").str(), "1.0a0");
  EXPECT_EQ(v("1.0.post-").str(), "1.0.post0");
  // ...refused numbers of more than 18 digits...
  EXPECT_EQ(v("1.0.post1234567890123456789012").str(), "1.0.post1234567890123456789012");
  // ...and kept a local label's leading zeros, which packaging's str() drops.
  EXPECT_EQ(v("1.0+Ab.Cd.01").str(), "1.0+ab.cd.1");
  EXPECT_EQ(v("1.0+ab.01"), v("1.0+ab.1"));
}

TEST(PackagingVersion, Orders) {
  std::vector<std::string> sorted = {
      "1.0.dev1",  "1.0a1.dev1", "1.0a1", "1.0b2.post3",    "1.0rc1",    "1.0", "1.0+abc",
      "1.0+abc.5", "1.0+abc.10", "1.0+5", "1.0.post1.dev1", "1.0.post1", "1.1", "1!0.1"};
  for (std::size_t i = 0; i + 1 < sorted.size(); ++i) {
    EXPECT_LT(compare(v(sorted[i]), v(sorted[i + 1])), 0) << sorted[i] << " < " << sorted[i + 1];
    EXPECT_TRUE(version_less(sorted[i], sorted[i + 1])) << sorted[i] << " < " << sorted[i + 1];
  }
  EXPECT_EQ(compare_versions("1.0", "1.0.0"), 0);
  EXPECT_TRUE(version_less("1.0", "1.0.0"));  // equal versions: by text, so a sort is one order
  EXPECT_LT(compare_versions("not a version", "0"), 0);
}

// Each ordering the old copies had wrong, where kiln used it.
TEST(PackagingVersion, WhatTheOldOrderingsGotWrong) {
  // index/model.cpp compared local labels as plain text: the project page listed 2.11 before 2.9.
  EXPECT_TRUE(version_less("1.0+cu130torch2.9", "1.0+cu130torch2.11"));
  EXPECT_FALSE(version_less("1.0+cu130torch2.11", "1.0+cu130torch2.9"));
  // ...and a non-canonical version by text against the other ("10.0.POST1" < "9.0").
  EXPECT_TRUE(version_less("9.0", "10.0.POST1"));
  // init/cuda_wheels.cpp read "13.0rc1" as 13.0 and an epoch as a release number.
  EXPECT_TRUE(version_less("13.0rc1", "13.0"));
  EXPECT_FALSE(version_less("1!1.0", "2.0"));
}

TEST(PackagingVersion, CanonicalAndForms) {
  EXPECT_TRUE(is_canonical_version("2!1.0rc1.post2.dev3"));
  for (const char* not_canonical : {"v1.0", "1.0-1", "01.0", "1.0+local", "0!1.0", " 1.0", "1.0C1"})
    EXPECT_FALSE(is_canonical_version(not_canonical)) << not_canonical;
  bool wildcard = false;
  EXPECT_EQ(match_version("1.7.*,", VersionForm::Equality, nullptr, &wildcard), 5u);
  EXPECT_TRUE(wildcard);
  EXPECT_EQ(match_version("1", VersionForm::Compatible, nullptr), 0u);  // ~= takes two numbers
  EXPECT_EQ(match_version("1.0+local", VersionForm::Ordered, nullptr), 3u);
}

TEST(PackagingWheelName, ReadsTheFieldsPackagingReads) {
  auto w = parse_wheel_file_name(
               "causal_conv1d-1.7.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl")
               .value();
  EXPECT_EQ(w.distribution, "causal_conv1d");
  EXPECT_EQ(w.project, "causal-conv1d");
  EXPECT_EQ(w.version, "1.7.0+cu130torch2.11");
  EXPECT_EQ(w.parsed_version.local(), "cu130torch2.11");
  EXPECT_EQ(w.build, "");
  EXPECT_EQ(w.tag_text(), "cp311-cp311-manylinux_2_34_x86_64");
  auto b = parse_wheel_file_name("Demo.Pkg-1.0.POST1+Local-1x-py3.cp311-abi3-any.whl").value();
  EXPECT_EQ(b.project, "demo-pkg");
  EXPECT_EQ(b.parsed_version.str(), "1.0.post1+local");
  EXPECT_EQ(b.build, "1x");
  EXPECT_EQ(b.tags(), (std::vector<std::string>{"cp311-abi3-any", "py3-abi3-any"}));
  // A tag written twice is one tag (found by the differential test).
  EXPECT_EQ(parse_wheel_file_name("x-1-py3.py3-none-any.any.whl").value().tags(),
            std::vector<std::string>{"py3-none-any"});
  EXPECT_EQ(wheel_file_name("Causal-Conv1d", "1.7.0", "py3-none-any"),
            "causal_conv1d-1.7.0-py3-none-any.whl");
}

TEST(PackagingWheelName, RefusesWhatPackagingRefuses) {
  for (auto [filename, why] : std::vector<std::pair<std::string, std::string>>{
           {"x.zip", "it does not end in .whl"},
           {"a-b.whl", "2 '-'-separated parts instead of 5 or 6"},
           {"demo__pkg-1.0-py3-none-any.whl", "the name 'demo__pkg' is not a project name"},
           {"demo+pkg-1.0-py3-none-any.whl", "the name 'demo+pkg' is not a project name"},
           {"-1.0-py3-none-any.whl", "the name '' is not a project name"},
           {"demo_pkg-1.0.x-py3-none-any.whl", "the version '1.0.x' is not a PEP 440 version"},
           {"demo_pkg-1.0-x1-py3-none-any.whl", "the build tag does not start with a digit"},
           {"demo_pkg-1.0-py3-none-.whl", "an empty tag"},
           {"demo_pkg-1.0-py3.-none-any.whl", "an empty tag"},
           {"demo_pkg-1.0-3py-none-any.whl", "the interpreter tag '3py' is not an identifier"},
           {"demo_pkg-1.0-py3.c+p-none-any.whl",
            "the interpreter tag 'c+p' is not an identifier"}}) {
    auto parsed = parse_wheel_file_name(filename);
    ASSERT_FALSE(parsed) << filename;
    EXPECT_EQ(parsed.error().kind, ErrorKind::BadInput);
    EXPECT_CONTAINS(parsed.error().message, why);
  }
}

}  // namespace kiln::packaging
