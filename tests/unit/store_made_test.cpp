// Store::ensure and find_made (cache/made.h), the build roots' gc and kept logs: what the cache
// makes once, on a real file system.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/lock.h"
#include "core/strings.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;

class StoreMade : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-made-").value());
    cache_ = dir_->path() / "cache";
    store_.emplace(cache_);
  }

  // A maker that writes `files` and then the marker, counting its calls.
  Maker writing(const MadeOnce& what, int& calls) {
    return [&calls, what](const fs::path& d, const fs::path& scratch) -> Expected<void> {
      ++calls;
      EXPECT_TRUE(fs::is_directory(scratch));
      EXPECT_FALSE(fs::exists(d));  // the maker makes it
      fs::create_directories((d / what.marker).parent_path());
      KILN_CHECK(write_file_atomic(d / "payload", "bytes"));
      return write_file_atomic(d / what.marker, "marker");
    };
  }

  // The names in `folder` of the cache, sorted.
  std::vector<std::string> names(const std::string& folder) {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache_ / folder, ec))
      if (e.path().extension() != ".lock")  // a made input's lock, an empty file, stays
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::optional<TempDir> dir_;
  fs::path cache_;
  std::optional<Store> store_;
  const std::string sha_ = sha256_hex("pins");
};

TEST_F(StoreMade, MakesOnceThenOnlyOpens) {
  const MadeOnce what = wheel_toolkit("13.0", sha_);
  EXPECT_FALSE(store_->find_made(what));
  int calls = 0;
  fs::path made = store_->ensure(what, writing(what, calls)).value();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(read_file(made / "payload").value(), "bytes");
  EXPECT_EQ(store_->find_made(what), made);
  EXPECT_EQ(store_->ensure(what, writing(what, calls)).value(), made);
  EXPECT_EQ(calls, 1);
  // Nothing but the made directory and its lock in its folder: no staging.
  EXPECT_EQ(names("toolkits"), std::vector<std::string>{what.name});
  EXPECT_TRUE(fs::is_regular_file(cache_ / "toolkits" / cat(what.name, ".lock")));
}

// Caches whose folder is one shared directory (a link, as the tests' caches and a team's scratch
// caches share sysroots/) share the lock of what is made there: one cache's ensure or gc never
// removes the staging another cache is filling.
TEST_F(StoreMade, CachesSharingAFolderShareItsLocks) {
  const MadeOnce what = torch_sysroot(sha_);
  const fs::path shared = dir_->path() / "shared-sysroots";
  fs::create_directories(shared / cat(".", what.name, ".tmp-filling") / "made");
  Store other(dir_->path() / "other");
  for (const fs::path& root : {cache_, dir_->path() / "other"}) {
    fs::create_directories(root);
    fs::create_directory_symlink(shared, root / "sysroots");
  }
  ASSERT_TRUE(store_->mark() && other.mark());
  {
    // The first cache is making it (its ensure holds this lock while its maker runs).
    FileLock held = FileLock::acquire(cache_ / "sysroots" / cat(what.name, ".lock")).value();
    EXPECT_EQ(other.gc(false).value().items, 0u);
    EXPECT_TRUE(fs::exists(shared / cat(".", what.name, ".tmp-filling")));
  }
  EXPECT_EQ(other.gc(false).value().items, 1u);  // nobody fills it now: a dead maker's
  int calls = 0;
  fs::path made = other.ensure(what, writing(what, calls)).value();
  EXPECT_EQ(store_->find_made(what), cache_ / "sysroots" / what.name);
  EXPECT_EQ(fs::canonical(made), fs::canonical(shared / what.name));
}

TEST_F(StoreMade, AFailedMakerLeavesNothing) {
  const MadeOnce what = setuptools_env(sha_);
  auto failed = store_->ensure(what, [](const fs::path& d, const fs::path&) -> Expected<void> {
    fs::create_directories(d / "bin");
    return Error::failed("pip said no");
  });
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().message, "pip said no");
  EXPECT_FALSE(store_->find_made(what));
  EXPECT_TRUE(names("envs").empty());
}

TEST_F(StoreMade, AMakerThatWritesNoMarkerFails) {
  const MadeOnce what = torch_sysroot(sha_);
  auto made = store_->ensure(what, [](const fs::path& d, const fs::path&) -> Expected<void> {
    fs::create_directories(d / "torch");
    return {};
  });
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("left no torch/version.py"), std::string::npos)
      << made.error().message;
  EXPECT_TRUE(names("sysroots").empty());
}

// What a process that died left: a directory without its marker and its staging beside it. The
// next ensure makes it anew; until then gc removes the staging of nobody holding the lock.
TEST_F(StoreMade, LeftoversOfADeadMakerAreRemoved) {
  const MadeOnce what = debian_toolkit("12.4", sha_);
  fs::create_directories(cache_ / "toolkits" / what.name / "bin");  // no marker: never completed
  fs::create_directories(cache_ / "toolkits" / cat(".", what.name, ".tmp-dead") / "made");
  ASSERT_TRUE(store_->mark());
  {
    FileLock held = FileLock::acquire(cache_ / "toolkits" / cat(what.name, ".lock"))
                        .value();  // being made now: gc leaves its staging alone
    EXPECT_EQ(store_->gc(false).value().items, 0u);
  }
  GcResult removed = store_->gc(false).value();
  EXPECT_EQ(removed.items, 1u);
  EXPECT_EQ(names("toolkits"), std::vector<std::string>{what.name});
  EXPECT_FALSE(store_->find_made(what));
  int calls = 0;
  fs::path made = store_->ensure(what, writing(what, calls)).value();
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(fs::exists(made / "bin"));
}

// A link where a made directory belongs is never taken for it, nor followed: it is replaced, and
// what it names is left alone.
TEST_F(StoreMade, ALinkWhereItBelongsIsReplacedNotFollowed) {
  const MadeOnce what = wheel_toolkit("13.0", sha_);
  const fs::path outside = dir_->path() / "outside";
  fs::create_directories(outside);
  ASSERT_TRUE(write_file_atomic(outside / what.marker, "planted"));
  fs::create_directories(cache_ / "toolkits");
  fs::create_directory_symlink(outside, cache_ / "toolkits" / what.name);
  EXPECT_FALSE(store_->find_made(what));
  int calls = 0;
  fs::path made = store_->ensure(what, writing(what, calls)).value();
  EXPECT_FALSE(fs::is_symlink(made));
  EXPECT_EQ(read_file(made / what.marker).value(), "marker");
  EXPECT_EQ(read_file(outside / what.marker).value(), "planted");
}

TEST_F(StoreMade, ANameThatLeavesItsFolderIsRefused) {
  const MadeOnce what = wheel_toolkit("/../../x", sha_);
  int calls = 0;
  auto made = store_->ensure(what, writing(what, calls));
  ASSERT_FALSE(made);
  EXPECT_EQ(made.error().kind, ErrorKind::BadInput);
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(store_->find_made(what));
  EXPECT_FALSE(fs::exists(dir_->path() / "x"));
}

// gc removes the build roots no build holds (a live build holds locks/build-<name>.lock, as
// BuildRoot::create takes it), and counts them apart.
TEST_F(StoreMade, GcRemovesAbandonedBuildRootsOnly) {
  ASSERT_TRUE(store_->mark());
  const std::string live(20, 'a'), dead(20, 'b');
  fs::create_directories(cache_ / "build" / live / "src");
  fs::create_directories(cache_ / "build" / dead / "src");
  fs::create_directories(cache_ / "build" / "not-a-root");
  {
    FileLock held = FileLock::acquire(cache_ / "locks" / cat("build-", live, ".lock")).value();
    EXPECT_EQ(store_->gc(false).value().build_roots, 1u);
    EXPECT_EQ(names("build"), (std::vector<std::string>{live, "not-a-root"}));
  }
  EXPECT_EQ(store_->gc(false).value().build_roots, 1u);  // let go: abandoned now
  EXPECT_EQ(names("build"), std::vector<std::string>{"not-a-root"});
}

TEST_F(StoreMade, KeptLogsReplaceTheKeysEarlierOnes) {
  const std::string key = sha256_hex("a build");
  const fs::path logs = dir_->path() / "root" / "logs";
  ASSERT_TRUE(write_file_atomic(logs / "1.log", "first"));
  fs::path kept = store_->keep_logs(key, logs);
  EXPECT_EQ(kept, cache_ / "logs" / key);
  ASSERT_TRUE(write_file_atomic(logs / "1.log", "second"));
  ASSERT_TRUE(write_file_atomic(logs / "2.log", "more"));
  EXPECT_EQ(store_->keep_logs(key, logs), kept);
  EXPECT_EQ(read_file(kept / "1.log").value(), "second");
  EXPECT_EQ(read_file(kept / "2.log").value(), "more");
  EXPECT_EQ(names("logs"), std::vector<std::string>{key});  // no staging left beside it
}

}  // namespace
}  // namespace kiln::cache
