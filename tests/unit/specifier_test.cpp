#include "packaging/specifier.h"

#include <gtest/gtest.h>

#include "packaging/marker.h"

namespace kiln::packaging {

namespace {

// What packaging 26.4 answers for these versions:
//   list(SpecifierSet(spec).filter(kVersions))
// (made with tools/bin/python; rerun it when packaging changes how it matches).
const std::vector<std::string> kVersions = {"1.5.0", "1.6.0",      "1.6.1",     "1.6.2rc1",
                                            "1.7.0", "1.7.1.dev0", "1.7.post1", "1.8.0a1",
                                            "2.0",   "1!0.5"};

struct Case {
  std::string spec;
  std::vector<std::string> kept;
};

const std::vector<Case> kPackagingTable = {
    {"", {"1.5.0", "1.6.0", "1.6.1", "1.7.0", "1.7.post1", "2.0", "1!0.5"}},
    {"==1.7", {"1.7.0"}},
    {"==1.7.0", {"1.7.0"}},
    {"==1.7.*", {"1.7.0", "1.7.post1"}},
    {"==1.*", {"1.5.0", "1.6.0", "1.6.1", "1.7.0", "1.7.post1"}},
    {"!=1.7.0", {"1.5.0", "1.6.0", "1.6.1", "1.7.post1", "2.0", "1!0.5"}},
    {"!=1.6.*", {"1.5.0", "1.7.0", "1.7.post1", "2.0", "1!0.5"}},
    {">=1.6,<1.7", {"1.6.0", "1.6.1"}},
    {"~=1.6.0", {"1.6.0", "1.6.1"}},
    {"~=1.6", {"1.6.0", "1.6.1", "1.7.0", "1.7.post1"}},
    {"<1.7", {"1.5.0", "1.6.0", "1.6.1"}},
    {"<1.7.1", {"1.5.0", "1.6.0", "1.6.1", "1.7.0", "1.7.post1"}},
    {">1.7", {"2.0", "1!0.5"}},
    {">1.7.0", {"2.0", "1!0.5"}},
    {"<=1.6.1", {"1.5.0", "1.6.0", "1.6.1"}},
    {">=1.7.1.dev0", {"1.7.1.dev0", "1.8.0a1", "2.0", "1!0.5"}},
    {"==1.6.2rc1", {"1.6.2rc1"}},
    {">=1.6.2rc1,<1.7", {"1.6.2rc1"}},
    {"===1.7.0", {"1.7.0"}},
    {"===1.7", {}},
    {"~=1.7.0.post1", {"1.7.post1"}},
    {">1.7.post0", {"1.7.post1", "2.0", "1!0.5"}},
    {"==2", {"2.0"}},
    {"==2.0.0", {"2.0"}},
    {"<2.0", {"1.5.0", "1.6.0", "1.6.1", "1.7.0", "1.7.post1"}},
    {">=1!0", {"1!0.5"}},
    {"==1!0.5.*", {"1!0.5"}},
    {">=3", {"1!0.5"}},
    {"<1.6.0", {"1.5.0"}},
    {"~=1.6.1rc1", {"1.6.1", "1.6.2rc1"}},
    {"==1.06.0", {"1.6.0"}},
    {"<1.7.1rc1", {"1.5.0", "1.6.0", "1.6.1", "1.6.2rc1", "1.7.0", "1.7.1.dev0", "1.7.post1"}},
    {">=1.8.0a1", {"1.8.0a1", "2.0", "1!0.5"}},
    {"!=1.7.0,!=1.6.1,>=1.6", {"1.6.0", "1.7.post1", "2.0", "1!0.5"}},
};

std::vector<std::string> filter(const std::string& spec, const std::vector<std::string>& versions) {
  auto set = SpecifierSet::parse(spec);
  EXPECT_TRUE(set) << spec << ": " << set.error().message;
  return set ? set->filter(versions) : std::vector<std::string>{};
}

}  // namespace

TEST(SpecifierTest, FiltersAsPackagingDoes) {
  for (const auto& c : kPackagingTable) EXPECT_EQ(filter(c.spec, kVersions), c.kept) << c.spec;
}

TEST(SpecifierTest, PreReleasesOnlyWhenNamedOrAlone) {
  // packaging: SpecifierSet(">=1").filter(["1.0rc1", "1.1.dev0"]) == ["1.1.dev0"]
  EXPECT_EQ(filter(">=1", {"1.0rc1", "1.1.dev0"}), std::vector<std::string>{"1.1.dev0"});
  EXPECT_EQ(filter("", {"1.0rc1"}), std::vector<std::string>{"1.0rc1"});
  EXPECT_EQ(filter("", {"1.0rc1", "0.9"}), std::vector<std::string>{"0.9"});
}

TEST(SpecifierTest, LocalLabels) {
  // packaging: "==1.7.0" keeps 1.7.0+cu130torch2.11; ">1.7.0" does not; "==1.7.0+cu130torch2.11"
  // does not keep 1.7.0.
  EXPECT_EQ(filter("==1.7.0", {"1.7.0+cu130torch2.11"}),
            std::vector<std::string>{"1.7.0+cu130torch2.11"});
  EXPECT_TRUE(filter(">1.7.0", {"1.7.0+cu130"}).empty());
  EXPECT_TRUE(filter("==1.7.0+cu130torch2.11", {"1.7.0"}).empty());
  auto set = SpecifierSet::parse("==1.7.0+CU130-torch2.11").value();
  EXPECT_EQ(set.local_labels(), std::vector<std::string>{"cu130.torch2.11"});
  SpecifierSet bare = SpecifierSet::parse("==1.7.0+cu130torch2.11").value().without_local_labels();
  EXPECT_EQ(bare.str(), "==1.7.0");
  EXPECT_EQ(bare.filter({"1.6.1", "1.7.0"}), std::vector<std::string>{"1.7.0"});
}

// The forms pip takes on its command line (the README's "a requirement as pip reads it"); each
// was "bad package spec" before issue 51.
TEST(SpecifierTest, RequirementsAsPipReadsThem) {
  auto extras = parse_requirement("causal-conv1d[dev, Test_Extra]").value();
  EXPECT_EQ(extras.normalized, "causal-conv1d");
  EXPECT_EQ(extras.extras, (std::vector<std::string>{"dev", "test-extra"}));
  EXPECT_TRUE(extras.specifiers.empty());
  EXPECT_TRUE(parse_requirement("causal-conv1d[]").value().extras.empty());
  auto marker = parse_requirement("causal-conv1d>=1.6; python_version>\"3\"").value();
  EXPECT_EQ(marker.specifiers.str(), ">=1.6");
  EXPECT_EQ(marker.marker, "python_version>\"3\"");
  auto paren = parse_requirement("causal-conv1d (>=1.6, <2)").value();
  EXPECT_EQ(paren.specifiers.str(), ">=1.6,<2");
  EXPECT_TRUE(paren.marker.empty());
  auto all = parse_requirement(" causal-conv1d [dev] (==1.6.0) ; os_name == 'posix' ").value();
  EXPECT_EQ(all.extras, std::vector<std::string>{"dev"});
  EXPECT_EQ(all.specifiers.str(), "==1.6.0");
  EXPECT_EQ(all.marker, "os_name == 'posix'");
}

// Marker.evaluate's answers (packaging 26.4) in a target's environment.
TEST(SpecifierTest, MarkersEvaluateAsPackagingDoes) {
  MarkerEnvironment env = {{"python_version", "3.12"},
                           {"python_full_version", "3.12.7"},
                           {"os_name", "posix"},
                           {"sys_platform", "linux"},
                           {"platform_system", "Linux"},
                           {"extra", ""},
                           {"platform_python_implementation", "CPython"}};
  auto value = [&](const char* marker) { return evaluate_marker(marker, env).value(); };
  EXPECT_TRUE(value("python_version > \"3\""));  // as a version: 3.12 > 3
  EXPECT_TRUE(value("python_version > '3.9'"));  // not as text ("3.12" < "3.9")
  EXPECT_FALSE(value("python_version < \"3\""));
  EXPECT_TRUE(value("python_version == '3.12.*'"));
  EXPECT_TRUE(value("python_full_version ~= '3.12.0'"));
  EXPECT_TRUE(value("'3.11' < python_version"));  // the variable on the right
  EXPECT_TRUE(value("os.name == 'posix' and sys_platform != 'win32'"));
  EXPECT_TRUE(value("os_name == 'nt' and sys_platform == 'win32' or platform_system == 'Linux'"));
  EXPECT_FALSE(
      value("os_name == 'nt' and (sys_platform == 'win32' or platform_system == 'Linux')"));
  EXPECT_TRUE(value("'lin' in sys_platform and 'z' not in os_name"));
  EXPECT_TRUE(value("python_implementation == 'CPython'"));
  EXPECT_TRUE(value("os_name == '\\x70osix'"));  // escapes as Python reads them
  EXPECT_FALSE(value("extra == 'dev'"));
  // Text where no version: packaging 26 orders no text (< and > false, <= and >= equality).
  EXPECT_FALSE(value("python_version == 'abc' or os_name > 'nt' or os_name < 'nt'"));
  EXPECT_TRUE(value("os_name >= 'posix' and python_version != 'abc'"));
  // packaging raises: an unknown value, ~= on text.
  auto unknown = evaluate_marker("platform_release >= '6'", env);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("it names platform_release, whose value is not known"),
            std::string::npos);
  EXPECT_FALSE(evaluate_marker("os_name ~= 'posix'", env));
  EXPECT_FALSE(evaluate_marker("python_version >", env));
}

TEST(SpecifierTest, Requirements) {
  auto r = parse_requirement("Causal_Conv1d >= 1.6, <1.7").value();
  EXPECT_EQ(r.name, "Causal_Conv1d");
  EXPECT_EQ(r.normalized, "causal-conv1d");
  EXPECT_EQ(r.specifiers.str(), ">=1.6,<1.7");
  EXPECT_TRUE(parse_requirement("causal-conv1d").value().specifiers.empty());
  struct Bad {
    const char* spec;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"causal-conv1d==", "no version after the operator"},
           {"causal-conv1d==x", "'x' is not a PEP 440 version"},
           {"causal-conv1d=1.7", "expected an operator"},
           {"causal-conv1d>=1.7.*", "'.*' goes only with == and !="},
           {"causal-conv1d~=1", "~= needs at least two release numbers"},
           {"causal-conv1d>=1.7+cu130", "a local label (+cu130) goes only with == and !="},
           {"causal-conv1d==1.7rc1.*", "a prefix ('.*') is release numbers only"},
           {"causal-conv1d[x", "the extras are not a list like [a,b]"},
           {"causal-conv1d[-x]", "an extra in [...] is not a name"},
           {"causal-conv1d (>=1.6", "no ')' closes the '('"},
           {"causal-conv1d; python_version >", "the marker after ';' is not PEP 508's"},
           {"causal-conv1d @ https://x.invalid/a.whl", "not a URL"},
           {"causal-conv1d 1.6", "expected a requirement as pip reads one"},
           {"==1.7", "expected a requirement as pip reads one"},
           {"causal-conv1d>=1.6,", "expected an operator"},
       }) {
    auto got = parse_requirement(b.spec);
    ASSERT_FALSE(got) << b.spec;
    EXPECT_EQ(got.error().kind, ErrorKind::BadInput);
    EXPECT_NE(got.error().message.find(b.message), std::string::npos)
        << b.spec << ": " << got.error().message;
    EXPECT_NE(got.error().message.find(std::string("bad package spec '") + b.spec),
              std::string::npos)
        << got.error().message;
  }
}

}  // namespace kiln::packaging
