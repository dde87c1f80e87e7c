#include "patch/patch.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "unit/source_dir.h"

namespace kiln::patch {

namespace {

using Files = std::map<std::string, std::string>;

// Plain writes (no fsync): test inputs only.
void put(const fs::path& file, const std::string& content) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary) << content;
}

void write_tree(const fs::path& dir, const Files& files) {
  for (const auto& [name, content] : files) put(dir / name, content);
}

// Everything under `dir`: directories, files with mode and bytes, symlinks with their targets.
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string rel = fs::relative(e.path(), dir).generic_string();
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    if (e.is_symlink())
      out[rel] = "link " + fs::read_symlink(e.path()).string();
    else if (e.is_directory())
      out[rel] = cat("dir ", std::oct, (st.st_mode & 07777));
    else
      out[rel] = cat("file ", std::oct, (st.st_mode & 07777), " ", read_file(e.path()).value());
  }
  return out;
}

// A unified diff between two sets of files, made by GNU diff (-N: missing files are empty).
std::string gnu_diff(const Files& before, const Files& after) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-diff-").value();
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "b");
  write_tree(dir.path() / "a", before);
  write_tree(dir.path() / "b", after);
  ProcessSpec spec;
  spec.argv = {"diff", "-ruN", "a", "b"};
  spec.cwd = dir.path();
  auto result = run_process(spec).value();
  EXPECT_EQ(result.exit_code, 1) << result.output;
  return result.output;
}

// Applies the series with GNU patch, one patch after the other; an error when one fails.
Expected<void> gnu_apply(const fs::path& tree, const std::vector<PatchText>& patches) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-gnu-").value();
  for (const auto& p : patches) {
    fs::path file = dir.path() / p.name;
    put(file, p.text);
    auto out = run_capture({"patch", "-p1", "--fuzz=0", "--no-backup-if-mismatch", "--force",
                            "--reject-file=-", "-d", tree.string(), "-i", file.string()});
    if (!out) return std::move(out).error();
  }
  return {};
}

class PatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    old_umask_ = ::umask(022);  // GNU patch creates files 0666 & ~umask; kiln creates them 0644
    ASSERT_FALSE(find_program("patch").empty()) << "GNU patch is required (scripts/install-deps)";
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-patch-").value());
  }
  void TearDown() override { ::umask(old_umask_); }

  fs::path fresh(const std::string& name, const Files& files,
                 const std::map<std::string, int>& modes = {}) {
    fs::path d = dir_->path() / name;
    fs::create_directories(d);
    write_tree(d, files);
    for (const auto& [f, mode] : modes) fs::permissions(d / f, static_cast<fs::perms>(mode));
    return d;
  }

  mode_t old_umask_ = 022;
  std::optional<TempDir> dir_;
};

std::string lines(int from, int to, const std::string& prefix = "line ") {
  std::string s;
  for (int i = from; i <= to; ++i) s += cat(prefix, i, "\n");
  return s;
}

struct Case {
  std::string name;
  Files tree;
  std::vector<PatchText> patches;
  std::map<std::string, int> modes = {};
};

std::vector<Case> gnu_cases() {
  std::vector<Case> cases;
  Files f30{{"f.txt", lines(1, 30)}};
  auto edit = [](std::string text, const std::string& from, const std::string& to) {
    auto at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return text.replace(at, from.size(), to);
  };
  std::string changed =
      edit(edit(lines(1, 30), "line 4\n", "LINE FOUR\n"), "line 25\n", "line 25\nnew 25a\n");

  cases.push_back(
      {"simple change",
       {{"f.txt", "a\nb\nc\n"}},
       {{"0001-simple.patch", gnu_diff({{"f.txt", "a\nb\nc\n"}}, {{"f.txt", "a\nB\nc\n"}})}}});
  cases.push_back({"multi-hunk, executable file keeps its mode",
                   f30,
                   {{"0001-two-hunks.patch", gnu_diff(f30, {{"f.txt", changed}})}},
                   {{"f.txt", 0755}}});
  cases.push_back({"offset hunks (+3, carried to the second hunk)",
                   {{"f.txt", "extra 1\nextra 2\nextra 3\n" + lines(1, 30)}},
                   {{"0001-offset.patch", gnu_diff(f30, {{"f.txt", changed}})}}});
  cases.push_back(
      {"negative offset",
       {{"f.txt", lines(1, 9) + lines(13, 30)}},
       {{"0001-offset.patch",
         gnu_diff(f30, {{"f.txt", edit(lines(1, 30), "line 25\n", "line 25\nnew 25a\n")}})}}});
  cases.push_back(
      {"create a file in a new directory (diff -N, epoch timestamp)",
       {{"f.txt", "x\n"}},
       {{"0001-new.patch",
         gnu_diff({{"f.txt", "x\n"}}, {{"f.txt", "x\n"}, {"pkg/sub/new.py", "print(1)\n"}})}}});
  cases.push_back(
      {"create with /dev/null and a git new file mode 100755",
       {{"f.txt", "x\n"}},
       {{"0001-git-new.patch",
         "Add a script.\n\ndiff --git a/tools/run.sh b/tools/run.sh\nnew file mode 100755\n"
         "index 0000000..1111111\n--- /dev/null\n+++ b/tools/run.sh\n@@ -0,0 +1,2 @@\n"
         "+#!/bin/sh\n+echo hi\n"}}});
  cases.push_back(
      {"delete a file (its emptied directories go too)",
       {{"keep.txt", "k\n"}, {"old/deep/gone.py", "a\nb\n"}},
       {{"0001-delete.patch",
         gnu_diff({{"keep.txt", "k\n"}, {"old/deep/gone.py", "a\nb\n"}}, {{"keep.txt", "k\n"}})}}});
  cases.push_back(
      {"delete with git's /dev/null",
       {{"gone.txt", "a\nb\n"}, {"k", "k\n"}},
       {{"0001-git-delete.patch",
         "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex 1111111..0000000\n"
         "--- a/gone.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"}}});
  cases.push_back({"add the missing newline at end of file",
                   {{"f.txt", "a\nb\nlast"}},
                   {{"0001-eol.patch",
                     gnu_diff({{"f.txt", "a\nb\nlast"}}, {{"f.txt", "a\nb\nlast\nmore\n"}})}}});
  cases.push_back(
      {"remove the newline at end of file",
       {{"f.txt", "a\nb\nlast\n"}},
       {{"0001-noeol.patch", gnu_diff({{"f.txt", "a\nb\nlast\n"}}, {{"f.txt", "a\nb\nLAST"}})}}});
  cases.push_back({"change a last line that has no newline on either side",
                   {{"f.txt", "a\nb\nc\nlast"}},
                   {{"0001-noeol2.patch",
                     gnu_diff({{"f.txt", "a\nb\nc\nlast"}}, {{"f.txt", "a\nB\nc\nlast"}})}}});
  cases.push_back({"multiple files in one patch",
                   {{"a.py", "1\n2\n3\n"}, {"src/b.cpp", "int x;\nint y;\n"}, {"c.txt", "same\n"}},
                   {{"0001-multi.patch",
                     gnu_diff({{"a.py", "1\n2\n3\n"}, {"src/b.cpp", "int x;\nint y;\n"}},
                              {{"a.py", "1\n2\n3\n4\n"}, {"src/b.cpp", "int x;\nint z;\n"}})}}});
  {
    Files v0{{"setup.py", lines(1, 20, "code ")}};
    Files v1{{"setup.py", edit(lines(1, 20, "code "), "code 10\n", "patched 10\n")}};
    Files v2{{"setup.py",
              edit(v1["setup.py"], "patched 10\ncode 11\n", "patched 10\npatched again 11\n")}};
    cases.push_back(
        {"a series where the second patch needs the first",
         v0,
         {{"0001-first.patch", gnu_diff(v0, v1)}, {"0002-second.patch", gnu_diff(v1, v2)}}});
  }
  cases.push_back(
      {"CRLF file, diff of CRLF files",
       {{"win.txt", "one\r\ntwo\r\nthree\r\n"}},
       {{"0001-crlf.patch", gnu_diff({{"win.txt", "one\r\ntwo\r\nthree\r\n"}},
                                     {{"win.txt", "one\r\nTWO\r\nthree\r\nfour\r\n"}})}}});
  {
    std::string p = gnu_diff({{"f.txt", "one\ntwo\nthree\n"}}, {{"f.txt", "one\nTWO\nthree\n"}});
    std::string crlf;
    for (char c : p) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    cases.push_back({"a patch saved with CRLF line ends, LF file",
                     {{"f.txt", "one\ntwo\nthree\n"}},
                     {{"0001-crlf-patch.patch", crlf}}});
  }
  cases.push_back(
      {"create a CRLF file without a final newline",
       {{"f.txt", "x\n"}},
       {{"0001-crlf-new.patch",
         gnu_diff({{"f.txt", "x\n"}}, {{"f.txt", "x\n"}, {"new.bat", "@echo off\r\necho hi"}})}}});
  cases.push_back(
      {"git mode change only",
       {{"run.sh", "echo\n"}},
       {{"0001-mode.patch", "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"}}});
  cases.push_back(
      {"git creates an empty file and deletes another (no hunks)",
       {{"old-empty", ""}, {"k", "k\n"}},
       {{"0001-empty.patch",
         "diff --git a/empty.txt b/empty.txt\nnew file mode 100644\nindex 0000000..e69de29\n"
         "diff --git a/old-empty b/old-empty\ndeleted file mode 100644\nindex "
         "e69de29..0000000\n"}}});
  cases.push_back({"old and new names differ (diff -u setup.py.orig setup.py)",
                   {{"setup.py", "a\nb\n"}},
                   {{"0001-orig.patch",
                     "--- a/setup.py.orig\n+++ b/setup.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"}}});
  cases.push_back(
      {"format-patch mail with a diffstat and a signature",
       {{"f.txt", "a\nb\nc\n"}},
       {{"0001-mail.patch",
         "From 0123 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\nBody text.\n---\n"
         " f.txt | 2 +-\n 1 file changed\n\ndiff --git a/f.txt b/f.txt\nindex 1..2 100644\n"
         "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n-- \n2.39.2\n\n"}}});
  cases.push_back({"hunks without context (diff -U0)",
                   {{"f.txt", lines(1, 10)}},
                   {{"0001-u0.patch",
                     "--- a/f.txt\n+++ b/f.txt\n@@ -3,0 +4,2 @@\n+ins 1\n+ins 2\n"
                     "@@ -7 +9 @@\n-line 7\n+LINE 7\n"}}});
  cases.push_back({"a removed line that looks like a file header",
                   {{"f.txt", "a\n-- b\nc\n"}},
                   {{"0001-dashes.patch",
                     "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n--- b\n+++ b\n c\n"}}});
  return cases;
}

}  // namespace

TEST_F(PatchTest, MatchesGnuPatchByteForByte) {
  int n = 0;
  for (const auto& c : gnu_cases()) {
    SCOPED_TRACE(c.name);
    fs::path kiln_tree = fresh(cat("kiln-", n), c.tree, c.modes);
    fs::path gnu_tree = fresh(cat("gnu-", n), c.tree, c.modes);
    ++n;
    auto before = snapshot(kiln_tree);
    auto gnu = gnu_apply(gnu_tree, c.patches);
    ASSERT_TRUE(gnu) << gnu.error().message << "\n" << gnu.error().detail;
    auto result = apply_series(kiln_tree, c.patches);
    ASSERT_TRUE(result) << result.error().message;
    EXPECT_EQ(snapshot(kiln_tree), snapshot(gnu_tree));
    EXPECT_NE(snapshot(kiln_tree), before);
    EXPECT_FALSE(result->changed_files.empty());
  }
}

TEST_F(PatchTest, ReportsChangedFilesAndOffsets) {
  Files f30{{"f.txt", lines(1, 30)}, {"other.txt", "o\n"}};
  std::string p = gnu_diff({{"f.txt", lines(1, 30)}},
                           {{"f.txt", "new top\n" + lines(1, 29) + "line 30 changed\n"}});
  fs::path tree =
      fresh("t", {{"f.txt", "pre 1\npre 2\npre 3\n" + lines(1, 30)}, {"other.txt", "o\n"}});
  auto result = apply_series(tree, {{"0002-x.patch", p}}).value();
  EXPECT_EQ(result.changed_files, std::vector<std::string>{"f.txt"});
  ASSERT_EQ(result.notes.size(), 2u);
  EXPECT_EQ(result.notes[0], "0002-x.patch: f.txt: hunk 1 applied at offset +3 (line 4)");
  EXPECT_EQ(result.notes[1], "0002-x.patch: f.txt: hunk 2 applied at offset +3 (line 30)");
}

TEST_F(PatchTest, KeepsCrlfOfTheTargetWithAnLfPatch) {
  // GNU patch refuses this ("different line endings"); kiln matches lines without their CR and
  // gives added lines the file's line end.
  fs::path tree = fresh("t", {{"win.txt", "one\r\ntwo\r\nthree\r\n"}});
  std::string p =
      gnu_diff({{"win.txt", "one\ntwo\nthree\n"}}, {{"win.txt", "one\nTWO\nthree\nfour\n"}});
  apply_series(tree, {{"p", p}}).value();
  EXPECT_EQ(read_file(tree / "win.txt").value(), "one\r\nTWO\r\nthree\r\nfour\r\n");
}

TEST_F(PatchTest, PatchesThroughASymlinkedDirectoryInsideTheTree) {
  fs::path tree = fresh("t", {{"src/a.py", "x = 1\n"}});
  fs::create_directory_symlink("src", tree / "alias");
  std::string p = "--- a/alias/a.py\n+++ b/alias/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n";
  auto result = apply_series(tree, {{"p", p}}).value();
  EXPECT_EQ(result.changed_files, std::vector<std::string>{"src/a.py"});
  EXPECT_EQ(read_file(tree / "src/a.py").value(), "x = 2\n");
  EXPECT_TRUE(fs::is_symlink(tree / "alias"));
}

TEST_F(PatchTest, SeriesCreatesThenEditsThenDeletes) {
  fs::path tree = fresh("t", {{"keep", "k\n"}});
  std::string create = "--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n";
  std::string edit = "--- a/n.txt\n+++ b/n.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
  std::string remove = "--- a/n.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-c\n";
  auto r = apply_series(tree, {{"1", create}, {"2", edit}}).value();
  EXPECT_EQ(read_file(tree / "n.txt").value(), "a\nc\n");
  EXPECT_EQ(r.changed_files, std::vector<std::string>{"n.txt"});
  std::string before = tree_sha256(tree).value();
  // Created and deleted within one series: nothing to write.
  fs::path tree2 = fresh("t2", {{"keep", "k\n"}});
  r = apply_series(tree2, {{"1", create}, {"2", edit}, {"3", remove}}).value();
  EXPECT_TRUE(r.changed_files.empty());
  EXPECT_EQ(snapshot(tree2), (std::map<std::string, std::string>{{"keep", "file 644 k\n"}}));
  // Editing a file an earlier patch deleted.
  auto err = apply_series(tree, {{"3-remove", remove}, {"4-edit", edit}});
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().message,
            "patch 4-edit: n.txt does not exist in the tree (an earlier patch deleted it)");
  EXPECT_EQ(tree_sha256(tree).value(), before);
}

// Failure cases: GNU patch fails too, and kiln leaves the tree exactly as it was.
TEST_F(PatchTest, FailuresLeaveTheTreeUntouched) {
  struct Failure {
    std::string name;
    Files tree;
    std::vector<PatchText> patches;
    std::string message;  // the whole message, or a prefix when it ends in "..."
  };
  Files base{{"f.txt", "a\nB\nc\n"}, {"g.txt", lines(1, 9)}};
  std::string good = gnu_diff({{"g.txt", lines(1, 9)}},
                              {{"g.txt", lines(1, 9) + "line 10\n"}, {"pkg/new.py", "n\n"}});
  std::vector<Failure> failures = {
      {"context mismatch",
       base,
       {{"0001-x.patch",
         "Header text.\n--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+b2\n c\n"}},
       "patch 0001-x.patch: f.txt: hunk 1 (@@ -1,3 +1,3 @@, patch line 4) does not apply: no exact "
       "match for its 3 context and removed lines; at line 2 the file has 'B' where the patch "
       "expects 'b'"},
      {"missing file",
       base,
       {{"0001-x.patch", "--- a/setup.py\n+++ b/setup.py\n@@ -1 +1 @@\n-a\n+b\n"}},
       "patch 0001-x.patch: setup.py does not exist in the tree"},
      {"hunk counts larger than the body",
       base,
       {{"0001-x.patch", "--- a/f.txt\n+++ b/f.txt\n@@ -1,4 +1,4 @@\n a\n-B\n+b\n c\n"}},
       "patch 0001-x.patch line 7: hunk 1 (@@ -1,4 +1,4 @@, line 3) is malformed: its header "
       "counts "
       "4 old and 4 new lines, but the patch ends after 3 and 3"},
      {"hunk counts smaller than the body",
       base,
       {{"0001-x.patch", "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-B\n+b\n c\n"}},
       "patch 0001-x.patch line 7: hunk 1 (@@ -1,2 +1,2 @@, line 3) has more lines than its header "
       "counts (' c')"},
      {"traversal path",
       base,
       {{"0001-x.patch", "--- a/../evil.txt\n+++ b/../evil.txt\n@@ -0,0 +1 @@\n+pwned\n"}},
       "patch 0001-x.patch line 1: file name 'a/../evil.txt' escapes the tree ('..')"},
      {"all or nothing: the second patch fails after the first applied in memory",
       base,
       {{"0001-good.patch", good},
        {"0002-bad.patch", "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+b2\n c\n"}},
       "patch 0002-bad.patch: f.txt: hunk 1 (@@ -1,3 +1,3 @@, patch line 3) does not apply: ..."},
      {"creating a file that exists",
       base,
       {{"0001-x.patch", "--- /dev/null\n+++ b/f.txt\n@@ -0,0 +1 @@\n+x\n"}},
       "patch 0001-x.patch: f.txt: the patch creates it, but it already exists in the tree"},
      {"only garbage",
       base,
       {{"0001-x.patch", "just words\n--- not a header\n"}},
       "patch 0001-x.patch: no file differences found (expected '--- ' and '+++ ' lines followed "
       "by "
       "'@@' hunks)"},
  };
  int n = 0;
  for (const auto& f : failures) {
    SCOPED_TRACE(f.name);
    fs::path kiln_tree = fresh(cat("kiln-", n), f.tree);
    fs::path gnu_tree = fresh(cat("gnu-", n), f.tree);
    ++n;
    EXPECT_FALSE(gnu_apply(gnu_tree, f.patches)) << "GNU patch applied it";
    auto before_hash = tree_sha256(kiln_tree).value();
    auto before = snapshot(kiln_tree);
    auto result = apply_series(kiln_tree, f.patches);
    ASSERT_FALSE(result);
    EXPECT_EQ(result.error().kind, ErrorKind::BadInput);
    if (f.message.size() > 3 && f.message.substr(f.message.size() - 3) == "...")
      EXPECT_EQ(result.error().message.substr(0, f.message.size() - 3),
                f.message.substr(0, f.message.size() - 3));
    else
      EXPECT_EQ(result.error().message, f.message);
    EXPECT_EQ(tree_sha256(kiln_tree).value(), before_hash);
    EXPECT_EQ(snapshot(kiln_tree), before);
  }
}

TEST_F(PatchTest, NeverWritesThroughSymlinksLeavingTheTree) {
  fs::path outside = fresh("outside", {{"victim.py", "x = 1\n"}});
  fs::path tree = fresh("t", {{"f.txt", "a\n"}});
  fs::create_directory_symlink(outside, tree / "link");
  fs::create_symlink(outside / "victim.py", tree / "file_link.py");
  fs::create_symlink("/nonexistent/kiln-dir", tree / "dangling");
  auto outside_before = snapshot(outside);
  auto tree_before = snapshot(tree);
  struct Attempt {
    std::string patch, message;
  };
  std::vector<Attempt> attempts = {
      {"--- a/link/victim.py\n+++ b/link/victim.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
       "patch p: link/victim.py: 'link' is a symlink pointing outside the tree"},
      {"--- /dev/null\n+++ b/link/new.py\n@@ -0,0 +1 @@\n+x\n",
       "patch p: link/new.py: 'link' is a symlink pointing outside the tree"},
      {"--- a/file_link.py\n+++ b/file_link.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
       "patch p: file_link.py is a symlink in the tree; kiln patches only regular files"},
      {"--- /dev/null\n+++ b/dangling/new.py\n@@ -0,0 +1 @@\n+x\n",
       "patch p: dangling/new.py: 'dangling' is a dangling symlink"},
      {"--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", ""},  // -p0 below
  };
  for (const auto& a : attempts) {
    SCOPED_TRACE(a.patch);
    auto r = a.message.empty() ? apply_series(tree, {{"p", a.patch}}, 0)
                               : apply_series(tree, {{"p", a.patch}});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    if (!a.message.empty())
      EXPECT_EQ(r.error().message, a.message);
    else
      EXPECT_EQ(r.error().message,
                "patch p line 1: file name '/etc/passwd' is absolute after stripping");
  }
  EXPECT_EQ(snapshot(outside), outside_before);
  EXPECT_EQ(snapshot(tree), tree_before);

  // A hard link to a file outside: the patched file is replaced (temp + rename), never written
  // in place, so the outside file keeps its bytes.
  fs::create_hard_link(outside / "victim.py", tree / "hard.py");
  apply_series(tree, {{"p", "--- a/hard.py\n+++ b/hard.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"}})
      .value();
  EXPECT_EQ(read_file(tree / "hard.py").value(), "x = 2\n");
  EXPECT_EQ(snapshot(outside), outside_before);
}

namespace {

int mode_of(const fs::path& file) {
  struct stat st {};
  EXPECT_EQ(::lstat(file.c_str(), &st), 0) << file;
  return static_cast<int>(st.st_mode & 07777);
}

}  // namespace

// The format docs/manifest.md ("Patches") describes, one feature per test, each applied to a
// real tree and its bytes checked.

TEST_F(PatchTest, CreatesFilesFromDevNullOrTheEpoch) {
  fs::path tree = fresh("t", {{"setup.py", "setup()\n"}});
  std::string patch =
      "--- /dev/null\n+++ b/example_ext/csrc/ext.cu\n@@ -0,0 +1,2 @@\n+#include <cuda.h>\n"
      "+int x;\n"
      // diff -ruN names the missing side with the epoch as its timestamp instead of /dev/null.
      "diff -ruN a/example_ext/__init__.py b/example_ext/__init__.py\n"
      "--- a/example_ext/__init__.py\t1970-01-01 00:00:00.000000000 +0000\n"
      "+++ b/example_ext/__init__.py\t2024-05-01 10:00:00.000000000 +0000\n"
      "@@ -0,0 +1 @@\n+from . import ext\n";
  auto result = apply_series(tree, {{"0001-new.patch", patch}}).value();
  EXPECT_EQ(result.changed_files,
            (std::vector<std::string>{"example_ext/__init__.py", "example_ext/csrc/ext.cu"}));
  EXPECT_TRUE(result.notes.empty());
  EXPECT_EQ(read_file(tree / "example_ext/csrc/ext.cu").value(), "#include <cuda.h>\nint x;\n");
  EXPECT_EQ(read_file(tree / "example_ext/__init__.py").value(), "from . import ext\n");
  EXPECT_EQ(mode_of(tree / "example_ext/csrc/ext.cu"), 0644);
  EXPECT_EQ(mode_of(tree / "example_ext/__init__.py"), 0644);
  EXPECT_EQ(read_file(tree / "setup.py").value(), "setup()\n");

  // Applied again, the file exists: refused, and nothing is written.
  auto before = snapshot(tree);
  auto again = apply_series(tree, {{"0001-new.patch", patch}});
  ASSERT_FALSE(again);
  EXPECT_EQ(again.error().message,
            "patch 0001-new.patch: example_ext/csrc/ext.cu: the patch creates it, but it already "
            "exists in the tree");
  EXPECT_EQ(snapshot(tree), before);
}

TEST_F(PatchTest, StripsExactlyOneLeadingComponent) {
  fs::path tree = fresh(
      "t", {{"src/x.py", "x = 1\n"}, {"a/src/x.py", "decoy\n"}, {"caf\xc3\xa9.py", "c = 1\n"}});
  std::vector<PatchText> series = {
      // git diff's a/ and b/.
      {"0001-ab.patch", "--- a/src/x.py\n+++ b/src/x.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n"},
      // diff -ruN orig new: whatever the first component is called, it goes.
      {"0002-dirs.patch",
       "--- orig/src/x.py\t2024-01-01 00:00:00.000000000 +0000\n"
       "+++ new/src/x.py\t2024-01-02 00:00:00.000000000 +0000\n@@ -1 +1 @@\n-x = 2\n+x = 3\n"},
      // git's C-quoted names (core.quotePath: octal escapes for bytes outside ASCII).
      {"0003-quoted.patch",
       "diff --git \"a/caf\\303\\251.py\" \"b/caf\\303\\251.py\"\nindex 1..2 100644\n"
       "--- \"a/caf\\303\\251.py\"\n+++ \"b/caf\\303\\251.py\"\n@@ -1 +1 @@\n-c = 1\n+c = 2\n"},
  };
  auto result = apply_series(tree, series).value();
  EXPECT_EQ(result.changed_files, (std::vector<std::string>{"caf\xc3\xa9.py", "src/x.py"}));
  EXPECT_EQ(read_file(tree / "src/x.py").value(), "x = 3\n");
  EXPECT_EQ(read_file(tree / "a/src/x.py").value(), "decoy\n");
  EXPECT_EQ(read_file(tree / "caf\xc3\xa9.py").value(), "c = 2\n");

  // Without a prefix (git diff --no-prefix) the first directory is stripped all the same.
  auto before = snapshot(tree);
  auto no_prefix =
      apply_series(tree, {{"p", "--- src/x.py\n+++ src/x.py\n@@ -1 +1 @@\n-x = 3\n+x = 4\n"}});
  ASSERT_FALSE(no_prefix);
  EXPECT_EQ(no_prefix.error().message, "patch p: x.py does not exist in the tree");
  auto bare = apply_series(tree, {{"p", "--- x.py\n+++ x.py\n@@ -1 +1 @@\n-x = 3\n+x = 4\n"}});
  ASSERT_FALSE(bare);
  EXPECT_EQ(bare.error().message,
            "patch p line 1: file name 'x.py' has fewer than 2 components (stripping 1)");
  EXPECT_EQ(snapshot(tree), before);
}

// `git diff --cached --no-renames` after `git add -A` in git 2.39: a mode change, a new file, a
// deletion and an edit, each with git's own header lines.
TEST_F(PatchTest, AppliesGitDiffsWithTheirHeaders) {
  fs::path tree = fresh("t", {{"setup.py", "import os\nARCHS = \"all\"\nsetup()\n"},
                              {"build.sh", "echo build\n"},
                              {"old.txt", "gone\n"}});
  std::string patch =
      "diff --git a/build.sh b/build.sh\n"
      "old mode 100644\n"
      "new mode 100755\n"
      "diff --git a/csrc/ext.h b/csrc/ext.h\n"
      "new file mode 100644\n"
      "index 0000000..6f70f09\n"
      "--- /dev/null\n"
      "+++ b/csrc/ext.h\n"
      "@@ -0,0 +1 @@\n"
      "+#pragma once\n"
      "diff --git a/old.txt b/old.txt\n"
      "deleted file mode 100644\n"
      "index 286c5f5..0000000\n"
      "--- a/old.txt\n"
      "+++ /dev/null\n"
      "@@ -1 +0,0 @@\n"
      "-gone\n"
      "diff --git a/setup.py b/setup.py\n"
      "index 222f8ef..bf89a0a 100644\n"
      "--- a/setup.py\n"
      "+++ b/setup.py\n"
      "@@ -1,3 +1,3 @@\n"
      " import os\n"
      "-ARCHS = \"all\"\n"
      "+ARCHS = os.environ[\"TORCH_CUDA_ARCH_LIST\"]\n"
      " setup()\n";
  auto result = apply_series(tree, {{"0001-git.patch", patch}}).value();
  EXPECT_EQ(result.changed_files,
            (std::vector<std::string>{"build.sh", "csrc/ext.h", "old.txt", "setup.py"}));
  EXPECT_EQ(read_file(tree / "setup.py").value(),
            "import os\nARCHS = os.environ[\"TORCH_CUDA_ARCH_LIST\"]\nsetup()\n");
  EXPECT_EQ(read_file(tree / "build.sh").value(), "echo build\n");
  EXPECT_EQ(mode_of(tree / "build.sh"), 0755);
  EXPECT_EQ(read_file(tree / "csrc/ext.h").value(), "#pragma once\n");
  EXPECT_EQ(mode_of(tree / "csrc/ext.h"), 0644);
  EXPECT_EQ(mode_of(tree / "setup.py"), 0644);
  EXPECT_FALSE(fs::exists(tree / "old.txt"));

  // What git writes for a binary file without --binary is refused, naming the line.
  auto before = snapshot(tree);
  auto binary =
      apply_series(tree, {{"0002-binary.patch",
                           "diff --git a/logo.png b/logo.png\nindex 1111111..2222222 100644\n"
                           "Binary files a/logo.png and b/logo.png differ\n"}});
  ASSERT_FALSE(binary);
  EXPECT_EQ(binary.error().message,
            "patch 0002-binary.patch line 3: binary diffs are not supported");
  EXPECT_EQ(snapshot(tree), before);
}

TEST_F(PatchTest, CrlfPatchesAndCrlfFiles) {
  std::string lf_patch =
      gnu_diff({{"f.txt", "one\ntwo\nthree\n"}}, {{"f.txt", "one\nTWO\nthree\nfour\n"}});
  std::string crlf_patch;  // the whole patch saved with CRLF line ends
  for (char c : lf_patch) crlf_patch += c == '\n' ? std::string("\r\n") : std::string(1, c);

  // Lines are compared without their CR; lines the patch adds take the file's line end.
  fs::path lf = fresh("lf", {{"f.txt", "one\ntwo\nthree\n"}});
  apply_series(lf, {{"p", crlf_patch}}).value();
  EXPECT_EQ(read_file(lf / "f.txt").value(), "one\nTWO\nthree\nfour\n");
  fs::path crlf = fresh("crlf", {{"f.txt", "one\r\ntwo\r\nthree\r\n"}});
  apply_series(crlf, {{"p", crlf_patch}}).value();
  EXPECT_EQ(read_file(crlf / "f.txt").value(), "one\r\nTWO\r\nthree\r\nfour\r\n");

  // A diff of CRLF files (LF headers, CRLF body lines) creating a file: it gets CRLF.
  std::string create = gnu_diff({}, {{"win/run.bat", "@echo off\r\necho hi\r\n"}});
  fs::path made = fresh("made", {{"f.txt", "x\n"}});
  auto result = apply_series(made, {{"p", create}}).value();
  EXPECT_EQ(result.changed_files, std::vector<std::string>{"win/run.bat"});
  EXPECT_EQ(read_file(made / "win/run.bat").value(), "@echo off\r\necho hi\r\n");
}

TEST_F(PatchTest, NoNewlineAtEndOfFileMarkers) {
  fs::path tree =
      fresh("t", {{"drop.txt", "a\nb\n"}, {"add.txt", "a\nb"}, {"keep.txt", "a\nb\nlast"}});
  std::string patch =
      // The new side has no final newline: the patch removes it.
      "--- a/drop.txt\n+++ b/drop.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
      "\\ No newline at end of file\n"
      // The old side had none: the patch adds it.
      "--- a/add.txt\n+++ b/add.txt\n@@ -1,2 +1,3 @@\n a\n-b\n\\ No newline at end of file\n"
      "+b\n+c\n"
      // Neither side has one: a context line ends the hunk and the file.
      "--- a/keep.txt\n+++ b/keep.txt\n@@ -1,3 +1,3 @@\n-a\n+A\n b\n last\n"
      "\\ No newline at end of file\n"
      // A new file without a final newline.
      "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\\ No newline at end of file\n";
  auto result = apply_series(tree, {{"p", patch}}).value();
  EXPECT_EQ(result.changed_files,
            (std::vector<std::string>{"add.txt", "drop.txt", "keep.txt", "new.txt"}));
  EXPECT_EQ(read_file(tree / "drop.txt").value(), "a\nB");
  EXPECT_EQ(read_file(tree / "add.txt").value(), "a\nb\nc\n");
  EXPECT_EQ(read_file(tree / "keep.txt").value(), "A\nb\nlast");
  EXPECT_EQ(read_file(tree / "new.txt").value(), "x\ny");

  // A hunk with the marker must end where the file ends.
  fs::path longer = fresh("longer", {{"drop.txt", "a\nb\nc\n"}});
  auto r = apply_series(longer, {{"p",
                                  "--- a/drop.txt\n+++ b/drop.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"
                                  "\\ No newline at end of file\n"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "patch p: drop.txt: hunk 1 (@@ -1,2 +1,2 @@, patch line 3) does not apply: no exact "
            "match for its 2 context and removed lines; its lines match at line 1 but it must end "
            "at the end of the file ('\\ No newline at end of file')");
  EXPECT_EQ(read_file(longer / "drop.txt").value(), "a\nb\nc\n");
}

TEST_F(PatchTest, DeletesOnlyWholeFiles) {
  fs::path tree = fresh("t", {{"old/deep/gone.py", "a\nb\n"}, {"old/keep.py", "k\n"}});
  auto result =
      apply_series(tree,
                   {{"p", "--- a/old/deep/gone.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"}})
          .value();
  EXPECT_EQ(result.changed_files, std::vector<std::string>{"old/deep/gone.py"});
  EXPECT_FALSE(fs::exists(tree / "old/deep"));  // the directories it empties go too
  EXPECT_EQ(read_file(tree / "old/keep.py").value(), "k\n");

  // A deletion whose hunks leave lines of the file is refused.
  fs::path longer = fresh("longer", {{"gone.py", "a\nb\nc\n"}});
  auto r = apply_series(longer, {{"p", "--- a/gone.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n"}});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "patch p: gone.py: the patch deletes it, but its hunks leave 1 line(s) of it");
  EXPECT_EQ(read_file(longer / "gone.py").value(), "a\nb\nc\n");
}

// Text outside file diffs is skipped, as GNU patch skips it: a commit message, `diff -ru` and
// "Only in" lines, and "Binary files … differ" outside a git header (that change is not applied).
TEST_F(PatchTest, SkipsTextAroundFileDiffsAsGnuPatchDoes) {
  Files files{{"f.txt", "a\nb\n"}, {"logo.png", "PNG"}};
  std::vector<PatchText> series = {
      {"p",
       "Fix b.\n\nOnly in b: extra.txt\nBinary files a/logo.png and b/logo.png differ\n"
       "diff -ru a/f.txt b/f.txt\n--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n"}};
  fs::path tree = fresh("kiln", files);
  fs::path gnu_tree = fresh("gnu", files);
  auto result = apply_series(tree, series).value();
  EXPECT_EQ(result.changed_files, std::vector<std::string>{"f.txt"});
  EXPECT_EQ(snapshot(tree), (std::map<std::string, std::string>{{"f.txt", "file 644 a\nB\n"},
                                                                {"logo.png", "file 644 PNG"}}));
  ASSERT_TRUE(gnu_apply(gnu_tree, series));
  EXPECT_EQ(snapshot(tree), snapshot(gnu_tree));
}

TEST_F(PatchTest, ParsesHeadersHunksAndMarkers) {
  std::string text =
      "A header line.\n--- ordinary text, not a file header\n\n"
      "diff --git a/src/x.py b/src/x.py\nindex 1..2 100644\n--- a/src/x.py\t2024-01-01 00:00:00 "
      "+0000\n"
      "+++ b/src/x.py\t2024-01-02 00:00:00 +0000\n@@ -3,4 +3,3 @@ def f():\n ctx\n-gone\n\n"
      " end\n\\ No newline at end of file\n"
      "diff --git a/new.sh b/new.sh\nnew file mode 100755\n--- /dev/null\n+++ \"b/new\\tname.sh\"\n"
      "@@ -0,0 +1,2 @@\n+hi\r\n+there\n\\ No newline at end of file\r\n";
  auto files = parse(text, "t.patch").value();
  ASSERT_EQ(files.size(), 2u);
  const FilePatch& a = files[0];
  EXPECT_EQ(a.old_path, "src/x.py");
  EXPECT_EQ(a.new_path, "src/x.py");
  EXPECT_FALSE(a.creates || a.deletes);
  EXPECT_EQ(a.header_line, 4);
  ASSERT_EQ(a.hunks.size(), 1u);
  const Hunk& h = a.hunks[0];
  EXPECT_EQ(h.header(), "@@ -3,4 +3,3 @@");
  EXPECT_EQ(h.header_line, 8);
  EXPECT_EQ(h.lines, (std::vector<std::string>{" ctx", "-gone", " ", " end"}));
  EXPECT_TRUE(h.old_no_newline);
  EXPECT_TRUE(h.new_no_newline);
  const FilePatch& b = files[1];
  EXPECT_TRUE(b.creates);
  EXPECT_EQ(b.old_path, "");
  EXPECT_EQ(b.new_path, "new\tname.sh");
  EXPECT_EQ(b.new_mode, 0755);
  EXPECT_TRUE(b.crlf);
  EXPECT_EQ(b.hunks[0].lines, (std::vector<std::string>{"+hi", "+there"}));
  EXPECT_FALSE(b.hunks[0].old_no_newline);
  EXPECT_TRUE(b.hunks[0].new_no_newline);

  // Strip counts.
  std::string deep = "--- x/y/z.c\n+++ x/y/z.c\n@@ -1 +1 @@\n-a\n+b\n";
  EXPECT_EQ(parse(deep, "p", 0).value()[0].old_path, "x/y/z.c");
  EXPECT_EQ(parse(deep, "p", 2).value()[0].old_path, "z.c");
  EXPECT_EQ(parse(deep, "p", 3).error().message,
            "patch p line 1: file name 'x/y/z.c' has fewer than 4 components (stripping 3)");
  // diff -N in another time zone still marks a new file.
  auto n =
      parse(
          "--- a/n\t1969-12-31 19:00:00.000000000 -0500\n+++ b/n\t2024-05-01 10:00:00.1 -0500\n"
          "@@ -0,0 +1 @@\n+x\n",
          "p")
          .value();
  EXPECT_TRUE(n[0].creates);
  auto m =
      parse("--- a/n\t1970-01-01 00:00:00.5 +0000\n+++ b/n\n@@ -1 +1 @@\n-x\n+y\n", "p").value();
  EXPECT_FALSE(m[0].creates);
}

// Every patch in patches/: it parses, and each hunk's header line, counts and body lines agree
// with the text they were read from.
TEST_F(PatchTest, RealPatchesParseWithTheirLineNumbers) {
  int hunks = 0;
  for (const auto& e :
       fs::recursive_directory_iterator(fs::path(kiln::test::source_dir()) / "patches")) {
    if (e.path().extension() != ".patch") continue;
    SCOPED_TRACE(e.path().string());
    std::string text = read_file(e.path()).value();
    std::vector<std::string> text_lines = split(text, "\n", false);
    auto files = parse(text, e.path().filename().string());
    ASSERT_TRUE(files) << files.error().message;
    for (const auto& fp : *files) {
      EXPECT_FALSE(fp.old_path.empty() && fp.new_path.empty());
      for (const auto& h : fp.hunks) {
        ++hunks;
        ASSERT_GE(h.header_line, 1);
        ASSERT_LE(static_cast<std::size_t>(h.header_line), text_lines.size());
        EXPECT_EQ(text_lines[h.header_line - 1].substr(0, 3), "@@ ");
        int old_lines = 0, new_lines = 0;
        std::size_t at = h.header_line;  // the line after the header (0-based)
        for (std::size_t k = 0; k < h.lines.size(); ++k, ++at) {
          old_lines += h.lines[k][0] != '+';
          new_lines += h.lines[k][0] != '-';
          if (text_lines[at].rfind("\\ ", 0) == 0) ++at;  // "\ No newline at end of file"
          std::string raw = text_lines[at];
          EXPECT_EQ(raw.empty() ? std::string(" ") : raw, h.lines[k]);
        }
        EXPECT_EQ(old_lines, h.old_count);
        EXPECT_EQ(new_lines, h.new_count);
      }
    }
  }
  EXPECT_GT(hunks, 0);
}

TEST_F(PatchTest, RejectsMalformedPatches) {
  struct Bad {
    std::string text, message;
  };
  std::vector<Bad> bad = {
      {"@@ -1 +1 @@\n-a\n+b\n",
       "patch p line 1: hunk header '@@ -1 +1 @@' is not preceded by a file header ('--- ' and "
       "'+++ ' lines)"},
      {"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\nsome text\n@@ -5 +5 @@\n-c\n+d\n",
       "patch p line 7: hunk header '@@ -5 +5 @@' is not preceded by a file header ('--- ' and "
       "'+++ ' lines)"},
      {"--- a/f\n+++ b/f\n@@ -1,x +1 @@\n-a\n+b\n",
       "patch p line 3: bad hunk header '@@ -1,x +1 @@'"},
      {"--- a/f\n+++ b/f\n@@ -1,9999999999 +1 @@\n-a\n+b\n",
       "patch p line 3: bad hunk header '@@ -1,9999999999 +1 @@'"},
      {"--- a/f\n+++ b/f\n@@ -0,0 +0,0 @@\n",
       "patch p line 3: hunk header '@@ -0,0 +0,0 @@' counts no lines"},
      {"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n-b\n+c\n+d\n",
       "patch p line 5: '\\ No newline at end of file' follows a line that is not the hunk's last"},
      {"--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n\\ x\n\\ y\n",
       "patch p line 7: '\\ y' does not follow a hunk's last line"},
      {"--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n*b\n",
       "patch p line 5: hunk 1 (@@ -1,2 +1,2 @@, line 3) is "
       "malformed: its header counts 2 old and 2 new lines, but its body ends ('*b') after 1 and "
       "1"},
      {"--- a/f\n+++ b/f\n", "patch p line 1: the diff of f has no hunks"},
      {"diff --git a/x b/y\nsimilarity index 90%\nrename from x\nrename to y\n",
       "patch p line 2: renames and copies are not supported (make the diff with --no-renames)"},
      {"diff --git a/x b/x\nindex 1..2\nGIT binary patch\nliteral 1\n",
       "patch p line 3: binary diffs are not supported"},
      {"diff --git a/l b/l\nnew file mode 120000\n",
       "patch p line 2: symlinks in patches are not supported"},
      {"--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+x\n",
       "patch p line 1: both file names are /dev/null"},
      {"--- /dev/null\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n",
       "patch p line 3: hunk 1 (@@ -1,1 +1,1 @@) of a new file has old lines"},
      {"--- a/\n+++ b/\n@@ -1 +1 @@\n-x\n+y\n",
       "patch p line 1: file name 'a/' is empty after stripping"},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.text);
    auto r = parse(b.text, "p");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    EXPECT_EQ(r.error().message, b.message);
  }
}

// Hostile bytes: mutated real patches never crash the parser or the applier, and a failed
// series leaves the tree as it was.
TEST_F(PatchTest, MutatedPatchesFailCleanly) {
  std::string base = gnu_diff({{"f.txt", lines(1, 12)}},
                              {{"f.txt", "top\n" + lines(1, 5) + lines(7, 12) + "end"}});
  fs::path tree = fresh("t", {{"f.txt", lines(1, 12)}});
  std::string original = read_file(tree / "f.txt").value();
  std::mt19937 rng(1234);
  const char alphabet[] = "@-+ \\\n\r0123456789,/.a";
  int applied = 0;
  for (int i = 0; i < 400; ++i) {
    std::string text = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      std::size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[at] = alphabet[rng() % (sizeof alphabet - 1)];
          break;
        case 1:
          text.erase(at, 1 + rng() % 8);
          break;
        default:
          text.insert(at, 1, alphabet[rng() % (sizeof alphabet - 1)]);
      }
      if (text.empty()) text = "x";
    }
    auto parsed = parse(text, "m.patch");
    if (!parsed) {
      EXPECT_EQ(parsed.error().kind, ErrorKind::BadInput);
      EXPECT_EQ(parsed.error().message.rfind("patch m.patch", 0), 0u) << parsed.error().message;
    }
    if (i % 4 != 0) continue;  // every fourth goes through apply_series (writes are slow)
    auto r = apply_series(tree, {{"m.patch", text}});
    if (r) {
      ++applied;
      put(tree / "f.txt", original);  // restore for the next round
      for (const auto& f : r->changed_files)
        if (f != "f.txt") fs::remove(tree / f);
    } else {
      EXPECT_EQ(r.error().message.rfind("patch m.patch", 0), 0u) << r.error().message;
      EXPECT_EQ(read_file(tree / "f.txt").value(), original);
    }
  }
  EXPECT_LT(applied, 100);
}

namespace {

// The sdist `file` in kiln's download cache ($KILN_CACHE, else ~/.cache/kiln/cache), where
// scripts/test fetches it before the tests run; empty when it is not there.
fs::path cached_download(const std::string& file) {
  const char* cache = std::getenv("KILN_CACHE");
  const char* home = std::getenv("HOME");
  fs::path downloads = cache && *cache
                           ? fs::path(cache) / "downloads"
                           : fs::path(home ? home : "/") / ".cache/kiln/cache/downloads";
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(downloads, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename() == file && it->is_regular_file(ec)) return it->path();
  return {};
}

}  // namespace

// The real causal-conv1d series against the real setup.py (the sdists scripts/test fetches): the
// whole series, and the series with each patch left out, give what GNU patch gives; where GNU
// patch fails, kiln fails and leaves the tree as it was.
TEST_F(PatchTest, RealCausalConv1dSeriesMatchesGnuPatch) {
  int ran = 0;
  for (std::string version : {"1.6.1", "1.7.0"}) {
    fs::path sdist = cached_download(cat("causal_conv1d-", version, ".tar.gz"));
    fs::path dir = fs::path(kiln::test::source_dir()) / "patches/causal-conv1d" / version;
    if (sdist.empty() || !fs::is_directory(dir)) continue;
    fs::path pristine = dir_->path() / cat("pristine-", version);
    fs::create_directories(pristine);
    run_capture({"tar", "-xzf", sdist.string(), "-C", pristine.string(), "--strip-components=1",
                 cat("causal_conv1d-", version, "/setup.py"),
                 cat("causal_conv1d-", version, "/csrc/causal_conv1d_bwd.cu")})
        .value();
    std::string setup_py = read_file(pristine / "setup.py").value();
    std::string bwd_cu = read_file(pristine / "csrc/causal_conv1d_bwd.cu").value();
    std::vector<fs::path> names;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".patch") names.push_back(e.path());
    std::sort(names.begin(), names.end());
    std::vector<PatchText> series;
    for (const auto& p : names) series.push_back({p.filename().string(), read_file(p).value()});
    ASSERT_FALSE(series.empty());

    for (std::size_t left_out = 0; left_out <= series.size(); ++left_out) {
      std::vector<PatchText> subset;
      for (std::size_t k = 0; k < series.size(); ++k)
        if (k != left_out) subset.push_back(series[k]);
      SCOPED_TRACE(cat(version, left_out < series.size() ? " without " + series[left_out].name
                                                         : std::string(", the whole series")));
      fs::path kiln_tree = dir_->path() / cat("kiln-", version, "-", left_out);
      fs::path gnu_tree = dir_->path() / cat("gnu-", version, "-", left_out);
      put(kiln_tree / "setup.py", setup_py);
      put(gnu_tree / "setup.py", setup_py);
      put(kiln_tree / "csrc/causal_conv1d_bwd.cu", bwd_cu);
      put(gnu_tree / "csrc/causal_conv1d_bwd.cu", bwd_cu);
      auto gnu = gnu_apply(gnu_tree, subset);
      auto result = apply_series(kiln_tree, subset);
      if (left_out == series.size()) {
        ASSERT_TRUE(gnu) << gnu.error().message << "\n" << gnu.error().detail;
      }
      if (gnu) {
        ASSERT_TRUE(result) << result.error().message;
        for (const auto& f : result->changed_files)
          EXPECT_TRUE(f == "setup.py" || f == "csrc/causal_conv1d_bwd.cu") << f;
        EXPECT_EQ(snapshot(kiln_tree), snapshot(gnu_tree));
        EXPECT_NE(read_file(kiln_tree / "setup.py").value(), setup_py);
      } else {
        ASSERT_FALSE(result) << "GNU patch failed: " << gnu.error().detail;
        EXPECT_EQ(result.error().kind, ErrorKind::BadInput);
        EXPECT_EQ(result.error().message.rfind("patch 000", 0), 0u) << result.error().message;
        EXPECT_NE(result.error().message.find(": setup.py: hunk "), std::string::npos)
            << result.error().message;
        EXPECT_EQ(read_file(kiln_tree / "setup.py").value(), setup_py);
        EXPECT_EQ(read_file(kiln_tree / "csrc/causal_conv1d_bwd.cu").value(), bwd_cu);
      }
    }
    ++ran;
  }
  EXPECT_EQ(ran, 2) << "the causal-conv1d 1.6.1 and 1.7.0 sdists are not in the download cache: "
                       "scripts/test fetches them (kiln fetch causal-conv1d==1.6.1 "
                       "causal-conv1d==1.7.0)";
}

}  // namespace kiln::patch
