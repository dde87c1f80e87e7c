#include "core/lock.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "core/fs.h"

namespace kiln {

class LockTest : public ::testing::Test {
 protected:
  TempDir dir_ = TempDir::create(fs::temp_directory_path(), "kiln-lock-").value();
  fs::path outside_ = dir_.path() / "outside";
  fs::path locks_ = dir_.path() / "locks";
  void SetUp() override {
    fs::create_directories(outside_);
    fs::create_directories(locks_);
  }
};

TEST_F(LockTest, ASymlinkPlantedAtTheLockIsNeitherFollowedNorLocked) {
  fs::path victim = outside_ / "created-by-kiln";
  fs::create_symlink(victim, locks_ / "k.lock");
  auto lock = FileLock::acquire(locks_ / "k.lock");
  ASSERT_FALSE(lock);
  EXPECT_NE(lock.error().message.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(FileLock::try_acquire(locks_ / "k.lock", /*create=*/true));
  EXPECT_FALSE(fs::exists(victim));  // nothing was created outside the tree
  // A link to an existing file outside is refused too: locking it would block its owner.
  std::ofstream(outside_ / "theirs") << "x";
  fs::create_symlink(outside_ / "theirs", locks_ / "t.lock");
  EXPECT_FALSE(FileLock::acquire(locks_ / "t.lock"));
  EXPECT_FALSE(FileLock::try_acquire(locks_ / "t.lock"));
}

TEST_F(LockTest, APlantedFifoFailsAtOnceInsteadOfBlocking) {
  ASSERT_EQ(::mkfifo((locks_ / "f.lock").c_str(), 0644), 0);
  EXPECT_FALSE(FileLock::acquire(locks_ / "f.lock"));
  EXPECT_FALSE(FileLock::try_acquire(locks_ / "f.lock"));
  EXPECT_FALSE(FileLock::try_acquire(locks_ / "f.lock", /*create=*/true));
}

TEST_F(LockTest, RegularFilesAndDirectoriesStillLock) {
  auto held = FileLock::acquire(locks_ / "a.lock");
  ASSERT_TRUE(held) << held.error().message;
  EXPECT_FALSE(FileLock::try_acquire(locks_ / "a.lock"));  // held
  EXPECT_TRUE(FileLock::try_acquire(locks_ / "b.lock", /*create=*/true));
  EXPECT_TRUE(FileLock::try_acquire(outside_));  // a directory, as staging leftovers are
}

}  // namespace kiln
