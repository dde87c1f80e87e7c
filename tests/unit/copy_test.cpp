#include "archive/copy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {
namespace {

class Copy : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ =
        std::make_unique<TempDir>(TempDir::create(fs::temp_directory_path(), "kiln-copy-").value());
    src_ = base_->path() / "src";
    fs::create_directories(src_ / "pkg" / "sub");
    std::ofstream(src_ / "pkg" / "__init__.py") << "x = 1\n";
    std::ofstream(src_ / "pkg" / "sub" / "data.txt") << "data\n";
    fs::create_directories(base_->path() / "outside");
    std::ofstream(base_->path() / "outside" / "secret") << "secret\n";
    dest_ = base_->path() / "dest";
  }
  fs::path link(const std::string& rel, const std::string& target) {
    fs::create_directory_symlink(target, src_ / rel);
    return src_ / rel;
  }
  // The copy fails with BadInput naming `needle`, and leaves nothing: no dest, nothing outside.
  void expect_refused(const std::string& needle) {
    auto r = copy_tree(src_, dest_);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput) << r.error().message;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    EXPECT_FALSE(fs::exists(fs::symlink_status(dest_)));
    std::vector<std::string> outside;
    for (const auto& e : fs::directory_iterator(base_->path() / "outside"))
      outside.push_back(e.path().filename());
    EXPECT_EQ(outside, std::vector<std::string>{"secret"});
  }
  std::unique_ptr<TempDir> base_;
  fs::path src_, dest_;
};

TEST_F(Copy, CopiesFilesModesAndInsideLinks) {
  std::ofstream(src_ / "run.sh") << "#!/bin/sh\n";
  ::chmod((src_ / "run.sh").c_str(), 0700);
  link("README", "pkg/sub/data.txt");
  link("pkg/up", "..");                                  // a directory link inside
  link("abs", (src_ / "pkg" / "__init__.py").string());  // absolute, but inside: made relative
  fs::create_directories(src_ / ".git" / "objects");     // VCS and bytecode litter is skipped
  fs::create_directories(src_ / "pkg" / "__pycache__");
  ASSERT_EQ(::mkfifo((src_ / "fifo").c_str(), 0644), 0);  // not a source file: skipped, never read
  auto r = copy_tree(src_, dest_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read_file(dest_ / "pkg" / "sub" / "data.txt").value(), "data\n");
  EXPECT_EQ(fs::read_symlink(dest_ / "README"), "pkg/sub/data.txt");
  EXPECT_EQ(read_file(dest_ / "README").value(), "data\n");
  EXPECT_EQ(fs::read_symlink(dest_ / "pkg" / "up"), "..");
  EXPECT_EQ(fs::read_symlink(dest_ / "abs"), "pkg/__init__.py");
  struct stat st;
  ASSERT_EQ(::stat((dest_ / "run.sh").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((dest_ / "pkg" / "__init__.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  EXPECT_FALSE(fs::exists(dest_ / ".git"));
  EXPECT_FALSE(fs::exists(dest_ / "pkg" / "__pycache__"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest_ / "fifo")));
}

TEST_F(Copy, RefusesAnAbsoluteLinkOutside) {
  link("innocent", (base_->path() / "outside" / "planted").string());
  expect_refused("'innocent' is a symlink to '");
}

TEST_F(Copy, RefusesARelativeLinkOutside) {
  link("pkg/innocent", "../../outside/secret");
  expect_refused(
      "'pkg/innocent' is a symlink to '../../outside/secret', which resolves outside the source "
      "directory");
}

// Each link alone stays inside as text; together they leave: "pkg/up" is the top, so "t" is its
// parent.
TEST_F(Copy, RefusesALinkThatLeavesThroughAnotherLink) {
  link("pkg/up", "..");
  link("t", "pkg/up/..");
  expect_refused("'t' is a symlink to 'pkg/up/..'");
}

TEST_F(Copy, RefusesLoops) {
  link("a", "b");
  link("b", "a");
  expect_refused("cannot be resolved");
}

TEST_F(Copy, RefusesControlCharactersInNames) {
  std::ofstream(src_ / "pkg" / "x\rname") << "x";
  expect_refused("has a control character (\\x0d) in its name");
}

TEST_F(Copy, DestinationMustNotExist) {
  fs::create_directories(dest_);
  auto r = copy_tree(src_, dest_);
  ASSERT_FALSE(r);
  EXPECT_TRUE(fs::exists(dest_));  // not ours: left alone
}

TEST_F(Copy, LimitsAreEnforced) {
  CopyLimits limits;
  limits.max_entries = 3;
  auto r = copy_tree(src_, dest_, limits);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("past 3 entries"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(dest_));
  limits = {};
  limits.max_total_bytes = 8;
  r = copy_tree(src_, dest_, limits);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("8-byte limit"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace kiln::archive
