
#include <gtest/gtest.h>

#include <limits>
#include <regex>
#include <tuple>

#include "core/strings.h"
#include "manifest/requirement.h"
#include "packaging/marker.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"

namespace kiln::manifest {

using namespace kiln::packaging;

TEST(Version, Names) {
  EXPECT_TRUE(is_valid_project_name("causal-conv1d"));
  EXPECT_TRUE(is_valid_project_name("fla_core"));
  EXPECT_FALSE(is_valid_project_name("-bad"));
  EXPECT_FALSE(is_valid_project_name("bad name"));
  EXPECT_EQ(normalize_name("Causal__Conv1D"), "causal-conv1d");
  EXPECT_EQ(normalize_name("a.-_b"), "a-b");
  EXPECT_EQ(file_name_part("causal-conv1d"), "causal_conv1d");
}

TEST(Version, Pep440) {
  for (auto v : {"1.6.1", "0.6.0", "1.5.0.post8", "2.0rc1", "1!2.0", "1.0.dev3", "3"})
    EXPECT_TRUE(is_canonical_version(v)) << v;
  for (auto v : {"1.6.x", "v1.0", "1.0-1", "01.2", "", "1.0+local"})
    EXPECT_FALSE(is_canonical_version(v)) << v;
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

// The regular expressions these checks once were (libstdc++'s std::regex recurses once per
// character and overflowed the stack on a string of about 50 KB), kept here as the reference the
// hand-written matchers must agree with on short, tricky inputs.
namespace {

const std::regex kOldVersion(
    R"(^(?:([1-9][0-9]*)!)?((?:0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*))*))"
    R"((?:(a|b|rc)(0|[1-9][0-9]*))?(?:\.post(0|[1-9][0-9]*))?(?:\.dev(0|[1-9][0-9]*))?$)");
const std::regex kOldName(R"(^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$)");
// compare_versions as it was (std::stol: short numbers only).
int old_compare(const std::string& a, const std::string& b) {
  struct V {
    long epoch = 0;
    std::vector<long> release;
    int pre_kind = 3;
    long pre = 0, post = -1, dev = -1;
  };
  auto parse = [](const std::string& text) {
    std::smatch m;
    V v;
    if (!std::regex_match(text, m, kOldVersion)) return v;
    if (m[1].matched) v.epoch = std::stol(m[1].str());
    for (const auto& part : split(m[2].str(), ".")) v.release.push_back(std::stol(part));
    while (v.release.size() > 1 && v.release.back() == 0) v.release.pop_back();
    if (m[3].matched) {
      v.pre_kind = m[3] == "a" ? 0 : m[3] == "b" ? 1 : 2;
      v.pre = std::stol(m[4].str());
    }
    if (m[5].matched) v.post = std::stol(m[5].str());
    if (m[6].matched) v.dev = std::stol(m[6].str());
    return v;
  };
  V x = parse(a), y = parse(b);
  std::size_t n = std::max(x.release.size(), y.release.size());
  x.release.resize(n, 0);
  y.release.resize(n, 0);
  auto key = [](const V& v) {
    int pre_kind = (v.pre_kind == 3 && v.post < 0 && v.dev >= 0) ? -1 : v.pre_kind;
    long dev = v.dev < 0 ? std::numeric_limits<long>::max() : v.dev;
    return std::make_tuple(v.epoch, v.release, pre_kind, v.pre, v.post, dev);
  };
  return key(x) < key(y) ? -1 : (key(y) < key(x) ? 1 : 0);
}

const std::vector<std::string> kVersions = {"0",
                                            "1",
                                            "01",
                                            "00",
                                            "10",
                                            "1.0",
                                            "1.01",
                                            "1.0.0.0",
                                            "1.2.3",
                                            "1!",
                                            "0!1",
                                            "1!0",
                                            "01!1",
                                            "1!1.0",
                                            "12!1",
                                            "!1",
                                            "1.",
                                            ".1",
                                            "1..0",
                                            "1a",
                                            "1a0",
                                            "1a01",
                                            "1a1",
                                            "1b2",
                                            "1rc3",
                                            "1c1",
                                            "1r1",
                                            "1rc",
                                            "1.0a1a2",
                                            "1.0.post",
                                            "1.0.post0",
                                            "1.0.post00",
                                            "1.0.post1.dev2",
                                            "1.0.dev2.post1",
                                            "1.0a1.post2.dev3",
                                            "1.0rc1.post1.dev1",
                                            "1.0.dev",
                                            "1.0.dev0",
                                            "1.0.dev01",
                                            "1.0-1",
                                            "1.0+local",
                                            " 1.0",
                                            "1.0 ",
                                            "1.0\n",
                                            "1.postx",
                                            "1!2!3",
                                            "2.11.0",
                                            "1.0.*",
                                            "v1",
                                            "1_0",
                                            "1.0.post1a",
                                            "",
                                            "1.0A1",
                                            "1.0.a1",
                                            "1.0-a1",
                                            "1.0post1",
                                            "1.0dev1",
                                            "1.0.post1.",
                                            "1.0.0.dev1",
                                            "1.0a0",
                                            "1.0b0.dev0",
                                            "0.0",
                                            "0.0.0.1",
                                            "1!1a1"};

const std::vector<std::string> kSpecifiers = {">=3.9",
                                              " >= 3.9 ",
                                              "~=1.0",
                                              "~1.0",
                                              "===1.0",
                                              "====1.0",
                                              "==1.0.*",
                                              "==1.*",
                                              "==1.0.*.*",
                                              "!=1.0",
                                              "<1",
                                              ">1",
                                              "<>1",
                                              "=1",
                                              "=>1",
                                              ">=1!2",
                                              ">=1!",
                                              ">=!2",
                                              ">=1a1",
                                              ">=1a",
                                              ">=1rc1",
                                              ">=1c1",
                                              ">=1.post1",
                                              ">=1.post",
                                              ">=1.dev1",
                                              ">=1.dev",
                                              ">=1.0a1.post1.dev1.*",
                                              ">=1\n",
                                              "\t>=1",
                                              ">=\v1",
                                              ">=1\f",
                                              ">=1\r\n",
                                              ">=1,<2",
                                              ">=1,",
                                              ",>=1",
                                              ">=1,,<2",
                                              "",
                                              " ",
                                              ">=01.02",
                                              ">=1.0.",
                                              ">= 1.0 .*",
                                              ">=1.0 a1",
                                              "==1.0+local",
                                              ">=3.9;",
                                              "@1",
                                              ">=1.*.0",
                                              ">=1.0.post1.dev1.*.*",
                                              ">= 1 , < 2 ",
                                              "<=",
                                              ">=1!2.0rc1",
                                              "~=1.0rc",
                                              "==1.0.dev1.*",
                                              ">=1.0 ",
                                              ">=1.0\x01"};

const std::vector<std::string> kRequirements = {"einops",
                                                " einops ",
                                                "a",
                                                "a-",
                                                "-a",
                                                "a.b_c-d",
                                                "a b",
                                                "a[x]",
                                                "a [x]",
                                                "a[ x , y ]",
                                                "a[x,]",
                                                "a[]",
                                                "a[x",
                                                "a[x]]",
                                                "a[x y]",
                                                "a>=1",
                                                "a >= 1",
                                                "a(>=1)",
                                                "a (>=1)",
                                                "a(>=1",
                                                "a>=1)",
                                                "a( >=1 )",
                                                "a(  )",
                                                "a()",
                                                "a@ https://x",
                                                "a @ https://x/y.whl",
                                                "a@",
                                                "a @",
                                                "a>=1;python_version<'3.9'",
                                                "a; extra == 'x'",
                                                "a;",
                                                "a; ",
                                                "a;\n x",
                                                "a; x\n",
                                                "a; x\r",
                                                "a; x\ty",
                                                "a>=1\n",
                                                "a>=1;\n",
                                                "a>=1 ; x",
                                                "a>=banana",
                                                "a>=1,<2",
                                                "a>=1,",
                                                "a==1.*",
                                                "a~=1",
                                                "a[x]>=1; extra=='y'",
                                                "a>=1(",
                                                "a>=1)(",
                                                "a>=1)x",
                                                "a>=1 x",
                                                "a;x;y",
                                                "a(>=1);x",
                                                "a (>=1) ; x",
                                                "a\x01",
                                                "a; \x01",
                                                "(a)",
                                                "a[x](>=1)",
                                                "a=1",
                                                "a!=1",
                                                "a<1",
                                                "a~1",
                                                "a>=1;;",
                                                "",
                                                " ",
                                                "a\v>=1",
                                                "a>=1\v",
                                                "a>= 1\f",
                                                "a@ x; y",
                                                "a @x(y)",
                                                "a>=1.0a1",
                                                "a>=1.0.post",
                                                "a >=1 ,<2",
                                                "a;\x80",
                                                "a\x80",
                                                "a[x]@ url",
                                                "a[x.y-z_w]",
                                                "a[-]",
                                                "a ( >= 1 , < 2 ) ; x",
                                                "a==1.0 )",
                                                "a ==1.0 ) ;x",
                                                "a(",
                                                "a)",
                                                "a;(",
                                                "a>=1\n;x",
                                                "a>=1;\r",
                                                "a;\tx",
                                                "a; x y z ",
                                                "a>=1 \n ; x",
                                                "torch >= banana",
                                                "a>",
                                                "a>1>2",
                                                "a==",
                                                "a!",
                                                "a~=",
                                                "a[x]",
                                                "A.B[x]>=1"};

const std::vector<std::string> kNames = {"a",     "A",  "0",  "a-",  "-a",  "a.b",
                                         "a..b",  "a_", "_a", "a b", "a\n", "\xc3\xa4",
                                         "a-b-c", "",   "a.", ".a",  "ab",  "a_-.b"};

}  // namespace

TEST(Version, MatchersAgreeWithTheRegularExpressionsTheyReplaced) {
  for (const auto& v : kVersions)
    EXPECT_EQ(is_canonical_version(v), std::regex_match(v, kOldVersion)) << "'" << v << "'";
  for (const auto& n : kNames)
    EXPECT_EQ(is_valid_project_name(n), std::regex_match(n, kOldName)) << "'" << n << "'";
  // Specifiers and requirements now follow packaging's grammar (non-canonical versions, parsed
  // markers), no longer the expressions they replaced: see PackagingsGrammar below and the
  // differential test (tests/e2e/test_validate_differential.py). A requirement's specifiers are a
  // valid set; every requirement is decided.
  for (const auto& s : kSpecifiers)
    EXPECT_TRUE(!is_valid_requirement("a" + s) || trim(s).empty() || s[0] == '@' ||
                is_valid_specifier_set(s))
        << "'a" << s << "'";
  for (const auto& r : kRequirements) (void)is_valid_requirement(r);
}

TEST(Version, OrderingAgreesWithTheOldOneOnEveryPair) {
  std::vector<std::string> valid;
  for (const auto& v : kVersions)
    if (std::regex_match(v, kOldVersion)) valid.push_back(v);
  // Not a version: the old one read it as "0"; it now sorts before every version
  // (PackagingVersion).
  for (const auto& a : valid)
    for (const auto& b : valid)
      EXPECT_EQ(compare_versions(a, b), old_compare(a, b)) << a << " vs " << b;
}

TEST(Version, NumbersOfAnyLengthCompareWithoutOverflow) {
  // std::stol threw std::out_of_range on these.
  const std::string big = "99999999999999999999";
  EXPECT_TRUE(is_canonical_version("1." + big));
  EXPECT_GT(compare_versions("1." + big, "1.99999999999999999998"), 0);
  EXPECT_LT(compare_versions("1." + big, "1.100000000000000000000"), 0);
  EXPECT_LT(compare_versions("1." + big, "2.0"), 0);
  EXPECT_GT(compare_versions(big + "!1", "1!" + big), 0);
  EXPECT_LT(compare_versions("1.0a" + big, "1.0b1"), 0);
  EXPECT_LT(compare_versions("1.0.post9", "1.0.post" + big), 0);
  EXPECT_LT(compare_versions("1.0.dev" + big, "1.0"), 0);
  EXPECT_GT(compare_versions("1.0.dev" + big, "1.0.dev9"), 0);
  EXPECT_EQ(compare_versions("1." + big + ".0.0", "1." + big), 0);
}

TEST(Version, MegabyteStringsAreDecidedWithoutRecursion) {
  // Each of these overflowed the stack (SIGSEGV) in std::regex.
  const std::size_t mb = 1 << 20;
  const std::string as(mb, 'a'), ones(mb, '1');
  std::string dotted = "1";
  while (dotted.size() < mb) dotted += ".0";
  EXPECT_TRUE(is_valid_project_name(as));
  EXPECT_FALSE(is_valid_project_name(as + "-"));
  EXPECT_TRUE(is_canonical_version(ones));
  EXPECT_TRUE(is_canonical_version(dotted));
  EXPECT_FALSE(is_canonical_version(dotted + "."));
  EXPECT_EQ(compare_versions(dotted, "1"), 0);
  EXPECT_GT(compare_versions(ones, dotted), 0);
  EXPECT_TRUE(is_valid_specifier_set(">=" + dotted));
  EXPECT_TRUE(is_valid_specifier_set(">=" + ones + std::string(mb, ' ')));
  std::string many;
  while (many.size() < mb) many += ">=1,";
  EXPECT_TRUE(is_valid_specifier_set(many + "<2"));
  EXPECT_TRUE(is_valid_requirement(as));
  EXPECT_TRUE(is_valid_requirement("a>=" + dotted));
  EXPECT_TRUE(is_valid_requirement("a; extra == '" + as + "'"));
  EXPECT_FALSE(is_valid_requirement("a; " + as));
  EXPECT_FALSE(is_valid_requirement("a; " + as + "\n"));
  EXPECT_TRUE(is_valid_requirement("a @ " + as));
  std::string extras = "a[x";
  while (extras.size() < mb) extras += ", x";
  EXPECT_TRUE(is_valid_requirement(extras + "]"));
  EXPECT_FALSE(is_valid_requirement(extras));
  EXPECT_EQ(requirement_name(as + ">=1"), as);
}

}  // namespace kiln::manifest

namespace kiln::manifest {

// What the differential test against packaging 26.4 found
// (tests/e2e/test_validate_differential.py), one case per class of disagreement.
TEST(Version, PackagingsGrammar) {
  // Non-canonical PEP 440 versions in specifiers: implicit numbers, -N post releases, spellings.
  EXPECT_TRUE(is_valid_requirement("cffi>=2.0.0b"));
  EXPECT_TRUE(is_valid_specifier_set(">=1.0-1"));
  EXPECT_TRUE(is_valid_specifier_set(">=1.0.post"));
  EXPECT_TRUE(is_valid_specifier_set(">=v1.0alpha2, !=1.0_rc1, <=1.0preview, >1.0-dev"));
  EXPECT_TRUE(is_valid_specifier_set("==1.0+Local.1, !=1.0.*, ~=1.0.REV3, ===any-thing"));
  EXPECT_TRUE(is_valid_specifier_set(">=1.0,"));
  EXPECT_FALSE(is_valid_specifier_set(">=1.0+local"));  // a local label only with == and !=
  EXPECT_FALSE(is_valid_specifier_set(">=1.0.*"));      // .* only with == and !=
  EXPECT_FALSE(is_valid_specifier_set("==1.0a1.*"));
  EXPECT_FALSE(is_valid_specifier_set("~=1"));  // two release numbers
  EXPECT_TRUE(is_valid_specifier_set("=== a"));
  EXPECT_FALSE(is_valid_specifier_set("=== "));
  EXPECT_TRUE(is_valid_specifier_set(" , "));  // packaging's empty set, written with a comma
  EXPECT_FALSE(is_valid_specifier_set(" "));   // blank: kiln wants a field to say something
  EXPECT_TRUE(is_version(" v1.0-1 "));
  EXPECT_TRUE(is_version("1.0a."));
  EXPECT_FALSE(is_version("1.0-"));
  EXPECT_FALSE(is_version("1.0+"));
  EXPECT_FALSE(is_canonical_version("v1.0"));  // the canonical check is unchanged
  // Requirements: packaging's names ("a_"), empty extras, a URL up to white space.
  EXPECT_TRUE(is_valid_requirement("a_"));
  EXPECT_FALSE(is_valid_requirement("a-"));
  EXPECT_TRUE(is_valid_requirement("a[]"));
  EXPECT_TRUE(is_valid_requirement("a>=1,"));
  EXPECT_FALSE(is_valid_requirement("a>=1, ,<2"));
  EXPECT_TRUE(is_valid_requirement("a@https://x.invalid/a.whl;os_name=='nt'"));
  EXPECT_FALSE(is_valid_requirement("a @ https://x.invalid/a.whl;os_name=='nt' x"));
}

TEST(Version, MarkersAreParsed) {
  EXPECT_FALSE(is_valid_requirement("cffi; this is not a marker"));
  EXPECT_TRUE(is_valid_requirement("cffi; python_version >= '3.9' and (os_name == 'nt')"));
  EXPECT_TRUE(is_valid_marker("python_version>'3'and os_name=='nt'"));
  EXPECT_TRUE(is_valid_marker("'cuda' in extras or dependency_groups == 'x'"));
  EXPECT_TRUE(is_valid_marker("os.name not \t in 'x' and platform.python_implementation=='a'"));
  EXPECT_TRUE(is_valid_marker("extra == 'a\\x41'"));
  EXPECT_TRUE(is_valid_marker("extra == \"a\tb\""));
  EXPECT_FALSE(is_valid_marker("extra == 'a\\'"));  // the escape eats the quote
  EXPECT_FALSE(is_valid_marker("os_name notin 'x'"));
  EXPECT_FALSE(is_valid_marker("os_name = 'x'"));
  EXPECT_FALSE(is_valid_marker("python_versio == '3'"));
  EXPECT_FALSE(is_valid_marker("os_name == 'x' and"));
  EXPECT_FALSE(is_valid_marker("os_name == 'x"));
  EXPECT_FALSE(is_valid_marker("extra"));
  EXPECT_FALSE(is_valid_marker(""));
  std::string deep(200, '('), too_deep(201, '(');
  EXPECT_TRUE(is_valid_marker(deep + "os_name=='a'" + std::string(200, ')')));
  EXPECT_FALSE(is_valid_marker(too_deep + "os_name=='a'" + std::string(201, ')')));
}

}  // namespace kiln::manifest
