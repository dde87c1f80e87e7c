#include "manifest/repository.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/fs.h"

namespace kiln::manifest {

namespace {

std::string manifest_text(const std::string& name, const std::string& version) {
  return "[package]\nname = \"" + name + "\"\nversion = \"" + version +
         "\"\nsummary = \"s\"\nlicense = \"MIT\"\nrequires-python = \">=3.9\"\n\n"
         "[source]\npypi = \"" +
         name + "\"\nsha256 = \"" + std::string(64, 'a') +
         "\"\n\n[build]\nbackend = \"pure\"\npackages = [\"pkg\"]\n";
}

class RepositoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::make_unique<TempDir>(TempDir::create(fs::temp_directory_path(), "kiln-repo-").value());
  }
  void add(const std::string& dir, const std::string& name, const std::string& version,
           const std::string& extra = "") {
    fs::create_directories(manifests() / dir);
    std::string text = manifest_text(name, version);
    text.insert(text.find("\n[source]"), extra);
    std::ofstream(manifests() / dir / (version + ".toml")) << text;
  }
  fs::path manifests() const { return dir_->path() / "manifests"; }
  Expected<Repository> load() {
    return Repository::load(manifests(), dir_->path() / "patches", "manifests");
  }
  std::unique_ptr<TempDir> dir_;
};

}  // namespace

TEST_F(RepositoryTest, SelectsNewestOrExact) {
  add("pkg-a", "pkg-a", "1.6.1");
  add("pkg-a", "pkg-a", "1.10.0");
  add("pkg-a", "pkg-a", "1.7.0");
  add("pkg-b", "pkg-b", "0.1.0");
  Repository repo = load().value();
  EXPECT_EQ(repo.select("pkg-a").value()->version, "1.10.0");  // PEP 440 order, not text order
  EXPECT_EQ(repo.select("pkg-a==1.6.1").value()->version, "1.6.1");
  EXPECT_EQ(repo.select("PKG_A==1.7.0").value()->version, "1.7.0");  // normalised names
  auto newest = repo.newest_of_each().value();
  ASSERT_EQ(newest.size(), 2u);
  EXPECT_EQ(newest[0]->version, "1.10.0");
  EXPECT_EQ(newest[1]->name, "pkg-b");
}

// Requirements as pip reads them: the newest manifest that matches, pre-releases only when named.
TEST_F(RepositoryTest, SelectsAsPipDoes) {
  for (const char* v : {"1.6.0", "1.6.1", "1.7.0", "2.0.0rc1"}) add("pkg-a", "pkg-a", v);
  Repository repo = load().value();
  auto pick = [&](const std::string& spec) {
    auto m = repo.select(spec);
    return m ? (*m)->version : "error: " + m.error().message;
  };
  EXPECT_EQ(pick("pkg-a"), "1.7.0");
  EXPECT_EQ(pick("pkg-a==1.7"), "1.7.0");  // 1.7 == 1.7.0
  EXPECT_EQ(pick("pkg-a==1.6.*"), "1.6.1");
  EXPECT_EQ(pick("pkg-a>=1.6,<1.7"), "1.6.1");
  EXPECT_EQ(pick("pkg-a~=1.6.0"), "1.6.1");
  EXPECT_EQ(pick("pkg-a~=1.6"), "1.7.0");
  EXPECT_EQ(pick("pkg-a!=1.7.0"), "1.6.1");
  EXPECT_EQ(pick("pkg-a<=1.6.0"), "1.6.0");
  EXPECT_EQ(pick("pkg-a>1.6.0,<2"), "1.7.0");
  EXPECT_EQ(pick("pkg-a===1.6.1"), "1.6.1");
  EXPECT_EQ(pick("pkg-a>=2.0.0rc1"), "2.0.0rc1");  // named: pre-releases allowed
  EXPECT_EQ(pick("pkg-a>=2"),
            "error: no manifest for pkg-a>=2 (have: 1.6.0, 1.6.1, 1.7.0, 2.0.0rc1)");
  // A local label names a target; resolve checks it, the manifest is the version it labels.
  EXPECT_EQ(pick("pkg-a==1.7.0+cu130torch2.11"), "1.7.0");
}

// A test fixture is built when named, never in the default set.
TEST_F(RepositoryTest, FixturesAreLeftOutOfTheDefaultSet) {
  add("pkg-a", "pkg-a", "1.0.0");
  add("demo", "demo", "0.1.0", "fixture = true\n");
  Repository repo = load().value();
  ASSERT_TRUE(repo.broken().empty()) << repo.broken()[0].error.message;
  auto newest = repo.newest_of_each().value();
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(newest[0]->name, "pkg-a");
  EXPECT_TRUE(repo.select("demo").value()->fixture);
}

TEST_F(RepositoryTest, SelectionErrors) {
  add("pkg-a", "pkg-a", "1.6.1");
  Repository repo = load().value();
  EXPECT_EQ(repo.select("pkg-x").error().message,
            "no manifest for package 'pkg-x' in manifests (did you mean 'pkg-a'?)");
  EXPECT_EQ(repo.select("pkg-a==9.9").error().message, "no manifest for pkg-a==9.9 (have: 1.6.1)");
  EXPECT_EQ(repo.select("pkg-a==x").error().message,
            "bad package spec 'pkg-a==x': 'x' is not a PEP 440 version");
  EXPECT_EQ(repo.select("pkg-a>=1.6,<x").error().message,
            "bad package spec 'pkg-a>=1.6,<x': '<x': 'x' is not a PEP 440 version");
  EXPECT_EQ(repo.select("pkg-a=>1.6").error().message,
            "bad package spec 'pkg-a=>1.6': expected an operator (==, !=, ~=, <, >, <=, >=, ===) "
            "and a version");
}

TEST_F(RepositoryTest, DuplicatePackageNames) {
  add("pkg-a", "pkg-a", "1.0.0");
  add("pkg_a", "pkg_a", "1.0.0");  // the same package once normalised
  add("pkg-b", "pkg-b", "1.0.0");
  Repository repo = load().value();
  ASSERT_EQ(repo.broken().size(), 1u);
  const std::string why =
      "manifests/pkg_a/1.0.0.toml:2:8: duplicate package 'pkg_a' 1.0.0: already declared in "
      "manifests/pkg-a/1.0.0.toml";
  EXPECT_EQ(repo.broken()[0].error.message, why);
  EXPECT_EQ(repo.select("pkg-a").error().message, why);
  EXPECT_EQ(repo.newest_of_each().error().message, why);
  EXPECT_EQ(repo.select("pkg-b").value()->name, "pkg-b");
}

// One malformed manifest fails only what needs it: its own package, and "every package".
TEST_F(RepositoryTest, ABrokenManifestFailsOnlyWhatNeedsIt) {
  add("pkg-a", "pkg-a", "1.0.0");
  add("pkg-b", "pkg-b", "1.0.0");
  fs::create_directories(manifests() / "pkg-b");
  std::ofstream(manifests() / "pkg-b" / "2.0.0.toml")
      << "[package]\nname = \"pkg-b\"\nversion = 2\n";
  Repository repo = load().value();
  ASSERT_EQ(repo.broken().size(), 1u);
  EXPECT_EQ(repo.broken()[0].package, "pkg-b");
  EXPECT_EQ(repo.select("pkg-a").value()->version, "1.0.0");
  auto b = repo.select("pkg-b");
  ASSERT_FALSE(b);
  EXPECT_EQ(b.error().kind, ErrorKind::BadInput);
  EXPECT_EQ(b.error().message.rfind("manifests/pkg-b/2.0.0.toml:3:", 0), 0u) << b.error().message;
  EXPECT_EQ(repo.select("pkg-b==1.0.0").value()->version, "1.0.0");  // another version: fine
  EXPECT_FALSE(repo.select("pkg-b==2.0.0"));
  EXPECT_FALSE(repo.newest_of_each());
}

TEST_F(RepositoryTest, Targets) {
  add("pkg-a", "pkg-a", "1.0.0");
  Repository repo = load().value();
  EXPECT_EQ(repo.target("default").value().name, "default");  // built in when no file
  EXPECT_EQ(repo.target("defualt").error().message,
            "no target 'defualt' in manifests/targets (did you mean 'default'?); the targets: "
            "default; `kiln target init --python PYTHON` (or `--torch VERSION`) writes one");
  EXPECT_EQ(repo.target("Bad Name").error().message, "bad target name 'Bad Name'");
}

// Command-line arguments of 1 MB (std::regex overflowed the stack on them: SIGSEGV): refused by
// their length first, the message showing only their start.
TEST_F(RepositoryTest, LongArgumentsAreRefusedByLength) {
  add("pkg-a", "pkg-a", "1.0.0");
  Repository repo = load().value();
  const std::string mb(1 << 20, 'a'), start(60, 'a');
  EXPECT_EQ(repo.select(mb).error().message,
            "bad package spec '" + start + "...': the name is longer than 200 bytes");
  EXPECT_EQ(repo.select(mb + "==1.0.0").error().message,
            "bad package spec '" + start + "...': the name is longer than 200 bytes");
  EXPECT_EQ(repo.select("pkg-a==1." + std::string(1 << 20, '0')).error().message,
            "bad package spec 'pkg-a==1." + std::string(51, '0') +
                "...': the version is longer than 128 bytes");
  EXPECT_EQ(repo.select("pkg-a==1." + std::string(1 << 20, '0')).error().kind, ErrorKind::BadInput);
  EXPECT_EQ(repo.target(mb).error().message,
            "bad target name '" + start + "...': longer than 128 bytes");
  // At the caps, the ordinary answers.
  EXPECT_EQ(repo.select(std::string(200, 'a')).error().message.rfind("no manifest for package", 0),
            0u);
  EXPECT_EQ(repo.target(std::string(128, 'a')).error().message.rfind("no target '", 0), 0u);
}

}  // namespace kiln::manifest
