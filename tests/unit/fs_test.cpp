#include "core/fs.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "core/strings.h"

namespace kiln {

TEST(Fs, ABoundedReadNeverReadsPastItsBoundWhateverThePathNames) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  write_file_atomic(dir.path() / "f", "12345").value();
  EXPECT_EQ(read_file(dir.path() / "f", 5).value(), "12345");
  EXPECT_FALSE(read_file(dir.path() / "f", 4));
  auto endless = read_file("/dev/zero", 1000);  // a device that never ends: refused at the bound
  ASSERT_FALSE(endless);
  EXPECT_NE(endless.error().message.find("larger than 1000"), std::string::npos);
  EXPECT_EQ(read_file("/dev/null", 10).value(), "");  // KILN_CONFIG=/dev/null reads as empty
  EXPECT_FALSE(read_file(dir.path(), 10));
  EXPECT_FALSE(read_file(dir.path() / "missing", 10));
}

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

// What a stranger's code left in a build root is read without following a link anywhere on the
// way: a link to a file outside, a directory that is a link, a path leaving the root.
TEST(Fs, ReadBeneathFollowsNoLink) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  const fs::path root = dir.path() / "root", outside = dir.path() / "secret";
  write_file_atomic(outside, "host secret").value();
  write_file_atomic(root / "dist" / "ok.whl", "wheel bytes").value();
  EXPECT_EQ(read_file_beneath(root, root / "dist" / "ok.whl", 100).value(), "wheel bytes");
  EXPECT_EQ(read_file_beneath(root, root / "dist" / "." / "ok.whl", 100).value(), "wheel bytes");
  fs::create_symlink(outside, root / "dist" / "link.whl");
  fs::create_directory_symlink(dir.path(), root / "up");
  for (const fs::path& p : {root / "dist" / "link.whl", root / "up" / "secret"}) {
    auto r = read_file_beneath(root, p, 100);
    ASSERT_FALSE(r) << p;
    EXPECT_NE(r.error().message.find("a symbolic link or not a directory (not followed)"),
              std::string::npos)
        << r.error().message;
  }
  auto up = read_file_beneath(root, root / ".." / "secret", 100);
  ASSERT_FALSE(up);
  EXPECT_NE(up.error().message.find("is not under"), std::string::npos) << up.error().message;
  auto big = read_file_beneath(root, root / "dist" / "ok.whl", 4);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("over the limit of 4"), std::string::npos);
  EXPECT_FALSE(read_file_beneath(root, root / "dist", 100));  // not a regular file
}

TEST(Fs, OpenRegularGivesSizeAndModeOrWhyNot) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-fs-").value();
  write_file_atomic(dir.path() / "run.sh", "#!/bin/sh\n", 0755).value();
  fs::create_symlink("run.sh", dir.path() / "link");
  auto file = open_regular(dir.path() / "run.sh");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_GE(file->fd.get(), 0);
  EXPECT_EQ(file->size, 10u);
  EXPECT_TRUE(file->executable);
  EXPECT_EQ(open_regular(dir.path() / "link")->size, 10u);  // followed unless told otherwise
  EXPECT_FALSE(open_regular(dir.path() / "link", O_NOFOLLOW));
  auto directory = open_regular(dir.path());
  ASSERT_FALSE(directory);
  EXPECT_EQ(directory.error().kind, ErrorKind::BadInput);
  EXPECT_NE(directory.error().message.find("is not a regular file"), std::string::npos);
  auto missing = open_regular(dir.path() / "missing");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot read"), std::string::npos);
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

namespace kiln {

// What only root and this user control is trusted; a component another user owns, or one anyone
// may write that is not a sticky directory, is named.
TEST(Fs, ATrustedPathIsOneOnlyRootAndThisUserControl) {
  EXPECT_TRUE(check_trusted_path("/usr/bin"));
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-trust-").value();
  fs::path mine = dir.path() / "mine";
  fs::create_directory(mine);
  EXPECT_TRUE(check_trusted_path(mine)) << check_trusted_path(mine).error().message;
  fs::permissions(mine, fs::perms::others_write, fs::perm_options::add);
  EXPECT_EQ(check_trusted_path(mine / ".").error().message,
            cat((mine / ".").string(), ": ", mine.string(), " is writable by anyone"));
  fs::permissions(mine, fs::perms::others_write, fs::perm_options::remove);
  // A link from a trusted place to one that is not: both are checked.
  fs::path open_dir = dir.path() / "open";
  fs::create_directory(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  fs::create_directory_symlink(open_dir, mine / "link");
  EXPECT_EQ(check_trusted_path(mine / "link").error().message,
            cat((mine / "link").string(), ": ", open_dir.string(), " is writable by anyone"));
  EXPECT_FALSE(check_trusted_path("relative/path"));
  EXPECT_FALSE(check_trusted_path(dir.path() / "missing"));
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(mine.c_str(), 65534, 65534), 0);
    EXPECT_EQ(check_trusted_path(mine).error().message,
              cat(mine.string(), ": ", mine.string(),
                  " is owned by uid 65534, neither root nor "
                  "this user"));
  }
}

}  // namespace kiln
