#include "manifest/manifest.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/settings.h"
#include "manifest/target.h"
#include "manifest/toml_reader.h"

namespace kiln::manifest {

namespace {

// Line numbers below refer to this text (line 1 is "[package]").
const char* kValid = R"([package]
name = "demo"
version = "1.0.0"
summary = "A demo extension"
license = "MIT"
requires-python = ">=3.9"
extra-dependencies = ["einops", "torch"]

[source]
pypi = "demo"
sha256 = "e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b"

[patches]
series = ["0001-fix.patch"]

[build]
backend = "native"
packages = ["demo"]

[[build.extension]]
name = "demo_cuda"
sources = ["csrc/demo.cpp", "csrc/demo.cu"]
nvcc-flags = ["-O3"]
)";

class ManifestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-manifest-").value());
    fs::create_directories(root() / "manifests" / "demo");
    fs::create_directories(root() / "patches" / "demo" / "1.0.0");
    std::ofstream(root() / "patches" / "demo" / "1.0.0" / "0001-fix.patch") << "--- a/x\n+++ b/x\n";
  }
  fs::path root() const { return dir_->path(); }
  Expected<Manifest> parse(const std::string& text) {
    return parse_manifest(text, root() / "manifests" / "demo" / "1.0.0.toml",
                          "manifests/demo/1.0.0.toml", root() / "patches");
  }
  // The text with `from` replaced by `to` (which must occur).
  static std::string edit(std::string from, std::string to) {
    std::string text = kValid;
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
    return text;
  }
  std::string error_of(const std::string& text) {
    auto m = parse(text);
    return m ? std::string("<no error>") : m.error().message;
  }
  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_F(ManifestTest, ValidManifestParses) {
  Manifest m = parse(kValid).value();
  EXPECT_EQ(m.name, "demo");
  EXPECT_EQ(m.version, "1.0.0");
  EXPECT_EQ(m.source.kind, Source::Kind::Pypi);
  ASSERT_EQ(m.patches.size(), 1u);
  EXPECT_EQ(m.patches[0].sha256, sha256_hex("--- a/x\n+++ b/x\n"));
  ASSERT_EQ(m.extensions.size(), 1u);
  EXPECT_EQ(m.extensions[0].sources.size(), 2u);
  EXPECT_EQ(m.extra_dependencies, (std::vector<std::string>{"einops", "torch"}));
}

// No string of a manifest, a target or the user's configuration holds a C0 control character or
// DEL: a NUL in the configuration's `cache` once cut the path where gc read it, so that
// `kiln cache gc` emptied the directory named before it. Each is a located error.
TEST_F(ManifestTest, NoStringHoldsAControlCharacter) {
  EXPECT_NE(error_of(edit(R"(summary = "A demo extension")", R"(summary = "A demo\u0000")"))
                .find("manifests/demo/1.0.0.toml:4:11: 'package.summary' holds the control "
                      "character U+0000 (no value here may hold one)"),
            std::string::npos);
  EXPECT_NE(
      error_of(edit(R"(["-O3"])", R"(["-O3", "-D\u001b[2J"])"))
          .find(
              "1.0.0.toml:23:22: 'build.extension.nvcc-flags' holds the control character U+001B"),
      std::string::npos);
  EXPECT_NE(error_of(edit(R"(summary = "A demo extension")", "summary = \"\"\"A\nB\"\"\""))
                .find("'package.summary' holds the control character U+000A"),
            std::string::npos);
  EXPECT_NE(error_of(edit(R"(name = "demo_cuda")", R"(name = "demo\u007f")")).find("U+007F"),
            std::string::npos);
  auto target = parse_target("[target]\ndescription = \"\\t\"\n", "t", "targets/t.toml");
  ASSERT_FALSE(target);
  EXPECT_NE(target.error().message.find("targets/t.toml:2:15: 'target.description' holds the "
                                        "control character U+0009"),
            std::string::npos)
      << target.error().message;
  for (const char* text : {"cache = \"/victim/\\u0000\"\n", "cache = \"\\u0000\"\n",
                           "target = [\"default\", \"x\\u0000\"]\n", "patches = \"\\r\"\n"}) {
    fs::path file = root() / "config.toml";
    std::ofstream(file) << text;
    auto config = load_user_config(file, root());
    ASSERT_FALSE(config) << text;
    EXPECT_EQ(config.error().kind, ErrorKind::BadInput);
    EXPECT_NE(config.error().message.find("holds the control character"), std::string::npos)
        << config.error().message;
  }
}

TEST_F(ManifestTest, CanonicalIgnoresCommentsAndLayout) {
  std::string commented = edit("[source]", "# where the bytes come from\n[source]  # pinned");
  std::string spaced = edit("backend = \"native\"", "backend    =   \"native\"   # the fast one");
  auto a = parse(kValid).value().canonical().dump();
  EXPECT_EQ(parse(commented).value().canonical().dump(), a);
  EXPECT_EQ(parse(spaced).value().canonical().dump(), a);
  EXPECT_NE(parse(edit("\"-O3\"", "\"-O2\"")).value().canonical().dump(), a);
}

TEST_F(ManifestTest, LinkKeysEnterTheCanonicalFormOnlyWhenWritten) {
  // An extension without them keeps the canonical form (and the build key) it had.
  auto plain = parse(kValid).value().canonical();
  EXPECT_EQ(plain["extensions"][0].dump(),
            R"({"cxx_flags":[],"define_macros":[],"include_dirs":[],"name":"demo_cuda",)"
            R"("nvcc_flags":["-O3"],"sources":["csrc/demo.cpp","csrc/demo.cu"]})");
  auto m = parse(edit("nvcc-flags = [\"-O3\"]",
                      "nvcc-flags = [\"-O3\"]\nlibraries = [\"m\", \":libz.so.1\"]\n"
                      "library-dirs = [\"lib\"]\nextra-link-args = [\"-Wl,-z,now\"]\n"
                      "kind = \"cuda\""))
               .value();
  const auto& e = m.extensions[0];
  EXPECT_EQ(e.libraries, (std::vector<std::string>{"m", ":libz.so.1"}));
  EXPECT_EQ(e.library_dirs, std::vector<std::string>{"lib"});
  EXPECT_EQ(e.extra_link_args, std::vector<std::string>{"-Wl,-z,now"});
  EXPECT_TRUE(e.cuda());
  auto c = m.canonical()["extensions"][0];
  EXPECT_EQ(c["libraries"], nlohmann::json({"m", ":libz.so.1"}));
  EXPECT_EQ(c["library_dirs"], nlohmann::json({"lib"}));
  EXPECT_EQ(c["extra_link_args"], nlohmann::json({"-Wl,-z,now"}));
  EXPECT_EQ(c["kind"], "cuda");  // written, so part of the key even when it is the default
  auto cxx = parse(edit("sources = [\"csrc/demo.cpp\", \"csrc/demo.cu\"]",
                        "sources = [\"csrc/demo.cpp\"]\nkind = \"cxx\""))
                 .value();
  EXPECT_FALSE(cxx.extensions[0].cuda());
}

TEST_F(ManifestTest, PatchBytesEnterTheCanonicalForm) {
  auto before = parse(kValid).value().canonical().dump();
  std::ofstream(root() / "patches" / "demo" / "1.0.0" / "0001-fix.patch") << "--- a/y\n+++ b/y\n";
  EXPECT_NE(parse(kValid).value().canonical().dump(), before);
}

struct BadCase {
  const char* what;
  const char* from;
  const char* to;
  const char* message;  // the whole message, "FILE:LINE:COL: ..."
};

class BadManifest : public ManifestTest, public ::testing::WithParamInterface<BadCase> {};

TEST_P(BadManifest, GivesPreciseMessage) {
  const BadCase& c = GetParam();
  auto m = parse(edit(c.from, c.to));
  ASSERT_FALSE(m) << c.what;
  EXPECT_EQ(m.error().kind, ErrorKind::BadInput);
  std::string message = m.error().message;
  std::string patches = (root() / "patches").string();
  if (auto at = message.find(patches); at != std::string::npos)
    message.replace(at, patches.size(), "<patches>");
  EXPECT_EQ(message, c.message) << c.what;
  // Every located error shows the offending line and a caret.
  if (std::string(c.message).find(".toml:") != std::string::npos) {
    EXPECT_NE(m.error().detail.find('^'), std::string::npos) << c.what;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadManifest,
    ::testing::Values(
        BadCase{"toml syntax", "name = \"demo\"", "name = \"demo",
                "manifests/demo/1.0.0.toml:2:13: TOML syntax error: Error while parsing string: "
                "unescaped control characters other than TAB (U+0009) are explicitly prohibited"},
        BadCase{"duplicate key", "license = \"MIT\"", "license = \"MIT\"\nlicense = \"BSD\"",
                "manifests/demo/1.0.0.toml:6:11: TOML syntax error: Error while parsing key-value "
                "pair: cannot redefine existing string 'license'"},
        BadCase{"unknown key with hint", "sha256 =", "sha265 =",
                "manifests/demo/1.0.0.toml:11:1: unknown key 'source.sha265' (did you mean "
                "'source.sha256'?)"},
        BadCase{"unknown table with hint", "[build]", "[biuld]",
                "manifests/demo/1.0.0.toml:16:2: unknown key 'biuld' (did you mean 'build'?)"},
        BadCase{"wrong type", "version = \"1.0.0\"", "version = 1.0",
                "manifests/demo/1.0.0.toml:3:11: 'package.version' must be a string, not a float"},
        BadCase{
            "missing required key", "summary = \"A demo extension\"\n", "",
            "manifests/demo/1.0.0.toml:1:1: missing required key 'package.summary' in [package]"},
        BadCase{"missing table",
                "[source]\npypi = \"demo\"\nsha256 = "
                "\"e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b\"\n",
                "", "manifests/demo/1.0.0.toml:1:1: missing required key 'source' in the file"},
        BadCase{"short sha256", "5125569f8b510b4559bc53e3095143d91369e1221b\"", "5125569f8b\"",
                "manifests/demo/1.0.0.toml:11:10: bad sha256 'e4a697ec2db3906f012e675125569f8b': "
                "expected 64 lowercase hexadecimal digits"},
        BadCase{"uppercase sha256", "sha256 = \"e4a697ec", "sha256 = \"E4A697EC",
                "manifests/demo/1.0.0.toml:11:10: bad sha256 "
                "'E4A697EC2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b': expected 64 "
                "lowercase hexadecimal digits"},
        BadCase{"bad version", "version = \"1.0.0\"", "version = \"1.x\"",
                "manifests/demo/1.0.0.toml:3:11: bad version '1.x': expected a PEP 440 version "
                "such as 1.6.1"},
        BadCase{"bad name", "name = \"demo\"", "name = \"demo pkg\"",
                "manifests/demo/1.0.0.toml:2:8: bad package name 'demo pkg': expected letters, "
                "digits, '-', '_' or '.'"},
        BadCase{"missing patch file", "\"0001-fix.patch\"]",
                "\"0001-fix.patch\", \"0002-gone.patch\"]",
                "manifests/demo/1.0.0.toml:14:29: patch file '0002-gone.patch' does not exist "
                "(looked in <patches>/demo/1.0.0)"},
        BadCase{"patch listed twice", "\"0001-fix.patch\"]",
                "\"0001-fix.patch\", \"0001-fix.patch\"]",
                "manifests/demo/1.0.0.toml:14:29: patch '0001-fix.patch' is listed twice"},
        BadCase{
            "unknown backend", "backend = \"native\"", "backend = \"natve\"",
            "manifests/demo/1.0.0.toml:17:11: unknown backend 'natve' (did you mean 'native'?)"},
        BadCase{"native without extension",
                "[[build.extension]]\nname = \"demo_cuda\"\nsources = [\"csrc/demo.cpp\", "
                "\"csrc/demo.cu\"]\nnvcc-flags = [\"-O3\"]\n",
                "",
                "manifests/demo/1.0.0.toml:17:11: the native backend needs at least one "
                "[[build.extension]]"},
        BadCase{"two source kinds", "pypi = \"demo\"",
                "pypi = \"demo\"\nurl = \"https://example.org/demo.tar.gz\"",
                "manifests/demo/1.0.0.toml:9:1: [source] needs exactly one of 'pypi', 'url', 'git' "
                "or 'path'"},
        BadCase{"bad git commit",
                "pypi = \"demo\"\nsha256 = "
                "\"e4a697ec2db3906f012e675125569f8b510b4559bc53e3095143d91369e1221b\"",
                "git = \"https://example.org/demo.git\"\ncommit = \"abc123\"",
                "manifests/demo/1.0.0.toml:11:10: bad commit 'abc123': expected 40 lowercase "
                "hexadecimal digits"},
        BadCase{"not a source file", "\"csrc/demo.cu\"]", "\"csrc/demo.c\"]",
                "manifests/demo/1.0.0.toml:22:29: 'csrc/demo.c' is not a C++ or CUDA source (.cpp, "
                ".cc, .cxx, .cu)"},
        BadCase{"path escapes the tree", "\"csrc/demo.cpp\"", "\"../etc/demo.cpp\"",
                "manifests/demo/1.0.0.toml:22:12: '../etc/demo.cpp' must be a relative path inside "
                "the source tree"},
        BadCase{"arch flag in manifest", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\", \"-gencode=arch=compute_90,code=sm_90\"]",
                "manifests/demo/1.0.0.toml:23:22: '-gencode=arch=compute_90,code=sm_90' selects "
                "architectures: archs come from the target, not the manifest"},
        BadCase{"library name that is an option", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nlibraries = [\"m\", \"-Wl,--wrap\"]",
                "manifests/demo/1.0.0.toml:24:19: bad library name '-Wl,--wrap': expected a name "
                "for -l (letters, digits, '_', '.', '+', '-', ':'; not starting with '-', no '/')"},
        BadCase{"library name that is a path", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nlibraries = [\"/usr/lib/m\"]",
                "manifests/demo/1.0.0.toml:24:14: bad library name '/usr/lib/m': expected a name "
                "for -l (letters, digits, '_', '.', '+', '-', ':'; not starting with '-', no '/')"},
        BadCase{"library dir outside the tree", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nlibrary-dirs = [\"../lib\"]",
                "manifests/demo/1.0.0.toml:24:17: '../lib' must be a relative path inside the "
                "source tree"},
        BadCase{"empty link argument", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nextra-link-args = [\"\"]",
                "manifests/demo/1.0.0.toml:24:20: bad link argument '': empty, or '-o' (kiln names "
                "the output)"},
        BadCase{"bad extension kind", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nkind = \"rocm\"",
                "manifests/demo/1.0.0.toml:24:8: bad extension kind 'rocm': expected \"cuda\" or "
                "\"cxx\""},
        BadCase{"cxx kind with a CUDA source", "nvcc-flags = [\"-O3\"]",
                "nvcc-flags = [\"-O3\"]\nkind = \"cxx\"",
                "manifests/demo/1.0.0.toml:22:29: 'csrc/demo.cu' is a CUDA source, but the "
                "extension's kind is \"cxx\""},
        BadCase{"bad requirement", "\"einops\", \"torch\"", "\"einops\", \"torch >= banana\"",
                "manifests/demo/1.0.0.toml:7:33: bad requirement 'torch >= banana': expected PEP "
                "508, e.g. 'einops>=0.6'"},
        BadCase{
            "bad requires-python", "\">=3.9\"", "\"3.9+\"",
            "manifests/demo/1.0.0.toml:6:19: bad version specifier '3.9+': expected e.g. '>=3.9'"},
        BadCase{"wrong array type", "extra-dependencies = [\"einops\", \"torch\"]",
                "extra-dependencies = \"einops\"",
                "manifests/demo/1.0.0.toml:7:22: 'package.extra-dependencies' must be an array of "
                "strings, not a string"},
        BadCase{"wrong element type", "extra-dependencies = [\"einops\", \"torch\"]",
                "extra-dependencies = [\"einops\", 3]",
                "manifests/demo/1.0.0.toml:7:33: 'package.extra-dependencies' must hold only "
                "strings, not an integer"},
        BadCase{"dependencies are the sdist's", "extra-dependencies = [\"einops\", \"torch\"]",
                "dependencies = [\"einops\"]",
                "manifests/demo/1.0.0.toml:7:16: 'package.dependencies' is no more: a wheel's "
                "requirements are the sdist's own (its PKG-INFO); list only what kiln must add, "
                "each with its reason, in 'extra-dependencies'"},
        BadCase{"license not SPDX", "license = \"MIT\"", "license = \"MIT License\"",
                "manifests/demo/1.0.0.toml:5:11: bad license 'MIT License': not an SPDX "
                "expression (license names joined by AND, OR, WITH and parentheses); expected an "
                "SPDX expression, e.g. \"MIT\" or \"BSD-3-Clause\""},
        BadCase{"license unknown", "license = \"MIT\"", "license = \"Banana-1.0\"",
                "manifests/demo/1.0.0.toml:5:11: bad license 'Banana-1.0': unknown SPDX license "
                "'banana-1.0'; expected an SPDX expression, e.g. \"MIT\" or \"BSD-3-Clause\""},
        BadCase{"duplicate extension", "nvcc-flags = [\"-O3\"]\n",
                "nvcc-flags = [\"-O3\"]\n\n[[build.extension]]\nname = \"demo_cuda\"\nsources = "
                "[\"csrc/other.cu\"]\n",
                "manifests/demo/1.0.0.toml:26:8: extension 'demo_cuda' is declared twice"},
        BadCase{"name does not match directory", "name = \"demo\"", "name = \"other\"",
                "manifests/demo/1.0.0.toml:2:8: package 'other' is declared in directory 'demo': "
                "the directory must be the package name"},
        BadCase{"version does not match file", "version = \"1.0.0\"", "version = \"1.0.1\"",
                "manifests/demo/1.0.0.toml:3:11: version '1.0.1' is declared in '1.0.0.toml': the "
                "file must be named 1.0.1.toml"},
        BadCase{"bad url scheme", "pypi = \"demo\"", "url = \"ftp://example.org/demo.tar.gz\"",
                "manifests/demo/1.0.0.toml:10:7: bad url 'ftp://example.org/demo.tar.gz': expected "
                "http://, https:// or file://"},
        BadCase{"key of another source kind", "pypi = \"demo\"",
                "url = \"https://example.org/d.tar.gz\"\nfile = \"d.tar.gz\"",
                "manifests/demo/1.0.0.toml:11:8: 'source.file' does not apply to this kind of "
                "source"}));

const char* kShard =
    "nvcc-flags = [\"-O3\"]\n\n[[build.extension.shard]]\nsource = \"csrc/demo.cu\"\nunits = 4\n"
    "index-define = \"DEMO_SHARD\"\ncount-define = \"DEMO_SHARDS\"\n";

TEST_F(ManifestTest, ShardableSourcesParseAndEnterTheCanonicalForm) {
  Manifest m = parse(edit("nvcc-flags = [\"-O3\"]\n", kShard)).value();
  ASSERT_EQ(m.extensions[0].shards.size(), 1u);
  const Shardable& s = m.extensions[0].shards[0];
  EXPECT_EQ(s.source, "csrc/demo.cu");
  EXPECT_EQ(s.units, 4);
  EXPECT_EQ(s.index_define, "DEMO_SHARD");
  EXPECT_EQ(s.count_define, "DEMO_SHARDS");
  auto plain = parse(kValid).value().canonical();
  auto sharded = m.canonical();
  EXPECT_FALSE(plain["extensions"][0].contains("shards"));
  EXPECT_EQ(sharded["extensions"][0]["shards"][0]["units"], 4);
  // A limit enters the canonical form only when written: the manifests without one keep their keys.
  EXPECT_EQ(s.max_shards, 0);
  EXPECT_FALSE(sharded["extensions"][0]["shards"][0].contains("max_shards"));
  std::string limited = kShard;
  limited.replace(limited.find("units = 4\n"), 10, "units = 4\nmax-shards = 2\n");
  Manifest l = parse(edit("nvcc-flags = [\"-O3\"]\n", limited)).value();
  EXPECT_EQ(l.extensions[0].shards[0].max_shards, 2);
  EXPECT_EQ(l.canonical()["extensions"][0]["shards"][0]["max_shards"], 2);
}

TEST_F(ManifestTest, BadShardsGivePreciseMessages) {
  auto with = [&](const std::string& from, const std::string& to) {
    std::string shard = kShard;
    shard.replace(shard.find(from), from.size(), to);
    return error_of(edit("nvcc-flags = [\"-O3\"]\n", shard));
  };
  EXPECT_EQ(
      with("csrc/demo.cu", "csrc/other.cu"),
      "manifests/demo/1.0.0.toml:26:10: 'csrc/other.cu' is not one of the extension's sources");
  EXPECT_EQ(with("units = 4", "units = 0"),
            "manifests/demo/1.0.0.toml:27:9: bad unit count 0: expected 1 to 1024");
  EXPECT_EQ(with("units = 4", "units = \"4\""),
            "manifests/demo/1.0.0.toml:27:9: 'build.extension.shard.units' must be an integer, not "
            "a string");
  EXPECT_EQ(with("units = 4\n", ""),
            "manifests/demo/1.0.0.toml:25:1: missing required key 'build.extension.shard.units' in "
            "[build.extension.shard]");
  EXPECT_EQ(with("\"DEMO_SHARD\"", "\"DEMO-SHARD\""),
            "manifests/demo/1.0.0.toml:28:16: bad macro name 'DEMO-SHARD'");
  EXPECT_EQ(with("\"DEMO_SHARDS\"", "\"DEMO_SHARD\""),
            "manifests/demo/1.0.0.toml:29:16: the index and count macros must differ");
  EXPECT_EQ(with("units = 4", "units = 4\nmax-shards = 0"),
            "manifests/demo/1.0.0.toml:28:14: bad shard limit 0: expected 1 to the 4 units");
  EXPECT_EQ(with("units = 4", "units = 4\nmax-shards = 5"),
            "manifests/demo/1.0.0.toml:28:14: bad shard limit 5: expected 1 to the 4 units");
  EXPECT_EQ(with("units = 4", "units = 4\nunit = 3"),
            "manifests/demo/1.0.0.toml:28:1: unknown key 'build.extension.shard.unit' (did you "
            "mean 'build.extension.shard.units'?)");
  std::string twice = std::string(kShard) +
                      "\n[[build.extension.shard]]\nsource = \"csrc/demo.cu\"\nunits = 2\n"
                      "index-define = \"A\"\ncount-define = \"B\"\n";
  EXPECT_EQ(error_of(edit("nvcc-flags = [\"-O3\"]\n", twice)),
            "manifests/demo/1.0.0.toml:32:10: 'csrc/demo.cu' is declared shardable twice");
}

TEST_F(ManifestTest, MissingPatchMessageNamesTheDirectory) {
  // The message above abbreviates the temp dir as <patches>; check the real one here.
  auto m = parse(edit("\"0001-fix.patch\"]", "\"0001-fix.patch\", \"0002-gone.patch\"]"));
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find((root() / "patches" / "demo" / "1.0.0").string()),
            std::string::npos);
}

TEST_F(ManifestTest, CaretPointsAtTheColumn) {
  auto m = parse(edit("backend = \"native\"", "backend = \"natve\""));
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().detail, "  backend = \"natve\"\n            ^");
}

// A located error on a very long line shows the part around the column, not the whole line, and
// no control characters.
TEST_F(ManifestTest, CaretContextIsCutToASaneWidth) {
  auto m = parse(edit("backend = \"native\"",
                      cat("backend = \"native\" # ", std::string(1 << 20, 'x'), "\x1b[31m oops")));
  ASSERT_FALSE(m);
  EXPECT_LT(m.error().detail.size(), 400u) << m.error().detail.substr(0, 400);
  EXPECT_LT(m.error().message.size(), 600u);
  EXPECT_EQ(m.error().detail.find('\x1b'), std::string::npos);
  auto lines = split(m.error().detail, "\n");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].substr(0, 5), "  ...");
  EXPECT_EQ(lines[1].back(), '^');
  EXPECT_LE(lines[1].size(), lines[0].size());  // the caret stands within the excerpt
  EXPECT_EQ(m.error().message.find('\x1b'), std::string::npos);
}

// Strings of 1 MB in every field a regular expression once checked (each overflowed the stack
// of std::regex: SIGSEGV), and in any other string: a located error naming the cap.
TEST_F(ManifestTest, LongStringsGetLocatedErrorsNamingTheCap) {
  struct Case {
    std::string from, before, after;  // `from` becomes before + a long string + after
    std::string where, what;          // "LINE:COL", the key as the message names it
    std::size_t cap;
  };
  const std::vector<Case> cases = {
      {"name = \"demo\"", "name = \"", "\"", "2:8", "'package.name'", 200},
      {"version = \"1.0.0\"", "version = \"1.", "\"", "3:11", "'package.version'", 128},
      {"\">=3.9\"", "\">=3.", "\"", "6:19", "'package.requires-python'", 4096},
      {"[\"einops\", \"torch\"]", "[\"einops\", \"torch>=", "\"]", "7:33",
       "an entry of 'package.extra-dependencies'", 4096},
      {"pypi = \"demo\"", "pypi = \"", "\"", "10:8", "'source.pypi'", 200},
      {"packages = [\"demo\"]", "packages = [\"", "\"]", "18:13", "an entry of 'build.packages'",
       200},
      {"name = \"demo_cuda\"", "name = \"", "\"", "21:8", "'build.extension.name'", 200},
      // Any other string: only the general cap.
      {"summary = \"A demo extension\"", "summary = \"", "\"", "4:11", "'package.summary'", 65536},
      {"[\"-O3\"]", "[\"", "\"]", "23:15", "an entry of 'build.extension.nvcc-flags'", 65536},
  };
  // 60 KB: over the field's cap; 1 MB: over the cap on any string, checked first.
  for (std::size_t size : {std::size_t{60000}, std::size_t{1} << 20}) {
    for (const auto& c : cases) {
      if (size <= c.cap) {  // under the cap on any string: valid here
        EXPECT_EQ(error_of(edit(c.from, c.before + std::string(size, 'x') + c.after)),
                  "<no error>");
        continue;
      }
      auto m = parse(edit(c.from, c.before + std::string(size, '1') + c.after));
      ASSERT_FALSE(m) << c.what;
      EXPECT_EQ(m.error().kind, ErrorKind::BadInput);
      std::size_t cap = size > 65536 ? 65536 : c.cap;
      EXPECT_EQ(m.error().message, cat("manifests/demo/1.0.0.toml:", c.where, ": ", c.what,
                                       " is longer than ", cap, " bytes"));
    }
  }
  // At the cap, the ordinary checks decide.
  EXPECT_EQ(
      error_of(edit("name = \"demo\"", "name = \"" + std::string(200, 'a') + "\"")).find("longer"),
      std::string::npos);
  // Long but under the caps: what a regular expression once checked is decided in one pass.
  EXPECT_EQ(
      error_of(edit("\"einops\", ", "\"einops; extra == '" + std::string(4000, 'x') + "'\", ")),
      "<no error>");
}

TEST(ManifestNames, IdentifierAgreesWithTheRegularExpressionItReplaced) {
  const std::regex old(R"(^[A-Za-z_][A-Za-z0-9_]*$)");
  for (std::string s : {"a", "_", "_1", "A_b9", "9a", "", "a-b", "a.b", "a b", "\xc3\xa4", "a\n",
                        "__init__", "Z", "z9_", "1", "a$"})
    EXPECT_EQ(is_identifier(s), std::regex_match(s, old)) << "'" << s << "'";
  EXPECT_TRUE(is_identifier(std::string(1 << 20, 'a')));
  EXPECT_FALSE(is_identifier(std::string(1 << 20, 'a') + "-"));
}

// Fuzzing found toml++ 3.3.0 reaching __builtin_unreachable on non-ASCII code points
// (tests/fuzz/corpus/manifest/crash-toml-unreachable): now a plain syntax error, and valid TOML
// with such a code point after a line-ending backslash parses.
TEST(TomlReader, NonAsciiWhereWhitespaceMayBeIsDefined) {
  auto m = parse_manifest("z \xEF\xBA\xBF-c", "/x/manifests/demo/1.0.toml",
                          "manifests/demo/1.0.toml", "/x/patches");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().kind, ErrorKind::BadInput);
  EXPECT_NE(m.error().message.find("manifests/demo/1.0.toml:1:3: TOML syntax error"),
            std::string::npos)
      << m.error().message;
  toml::table t = parse_toml(SourceText{"t.toml", "s = \"\"\"\\\n\xC2\xA7 and \xC2\xA1\"\"\"\n"});
  EXPECT_EQ(t["s"].value_or(std::string()), "\xC2\xA7 and \xC2\xA1");
}

}  // namespace kiln::manifest
