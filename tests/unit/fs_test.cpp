#include "core/fs.h"

#include <gtest/gtest.h>

#include <fstream>

namespace kiln {

TEST(Fs, AtomicWriteReplacesWholeFile) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  fs::path file = dir.path() / "sub" / "x.txt";
  write_file_atomic(file, "first").value();
  write_file_atomic(file, "second").value();
  EXPECT_EQ(read_file(file).value(), "second");
  // No temp files left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(file.parent_path())) ++entries;
  EXPECT_EQ(entries, 1);
}

TEST(Fs, UncommittedAtomicFileLeavesNothing) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  fs::path file = dir.path() / "y.bin";
  {
    auto f = AtomicFile::create(file).value();
    f.write("partial").value();
    EXPECT_TRUE(fs::exists(f.temp_path()));
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(Fs, TempDirRemovesItself) {
  fs::path kept;
  {
    auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
    kept = dir.path();
    std::ofstream(kept / "f") << "x";
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(Fs, StaleStagingOfOneDestinationIsRemovedAndNothingElse) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  fs::path dest = dir.path() / "env-a";
  fs::create_directories(dest / "half");  // a destination whose maker died is not whole
  auto dead = TempDir::create(dir.path(), ".env-a.tmp-").value().release();
  std::ofstream(dead / "f") << "x";
  auto other = TempDir::create(dir.path(), ".env-b.tmp-").value();  // another destination's
  fs::path outside = dir.path() / "outside";
  fs::create_directories(outside);
  std::ofstream(outside / "kept") << "x";
  fs::create_symlink(outside, dir.path() / ".env-a.tmp-link");  // a link: removed, not followed
  remove_stale_staging(dest);
  EXPECT_FALSE(fs::exists(dest));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::is_symlink(dir.path() / ".env-a.tmp-link"));
  EXPECT_TRUE(fs::exists(outside / "kept"));
  EXPECT_TRUE(fs::exists(other.path()));
}

TEST(Fs, TreeHashIgnoresPycacheAndSeesContentAndMode) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  std::ofstream(dir.path() / "a.py") << "print(1)\n";
  std::string h1 = tree_sha256(dir.path()).value();
  fs::create_directories(dir.path() / "__pycache__");
  std::ofstream(dir.path() / "__pycache__" / "a.cpython-311.pyc") << "junk";
  EXPECT_EQ(tree_sha256(dir.path()).value(), h1);
  std::ofstream(dir.path() / "a.py") << "print(2)\n";
  std::string h2 = tree_sha256(dir.path()).value();
  EXPECT_NE(h2, h1);
  fs::permissions(dir.path() / "a.py", fs::perms::owner_exec, fs::perm_options::add);
  EXPECT_NE(tree_sha256(dir.path()).value(), h2);
}

}  // namespace kiln
