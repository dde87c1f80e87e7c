#include "cache/store.h"

#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"

namespace kiln::cache {

namespace {
fs::path make_wheel(const fs::path& dir, const std::string& name, const std::string& content) {
  fs::create_directories(dir);
  std::ofstream(dir / name) << content;
  return dir / name;
}
const std::string kKey = std::string(64, 'a');
}  // namespace

TEST(Store, CommitLookupVerifyRemove) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  EXPECT_FALSE(store.lookup(kKey));
  fs::path wheel = make_wheel(dir.path() / "out", "x-1.0-py3-none-any.whl", "wheel bytes");
  Entry e = store.commit(kKey, wheel, {{"package", "x"}, {"version", "1.0"}}).value();
  EXPECT_FALSE(fs::exists(wheel));  // moved in
  EXPECT_EQ(e.sha256, sha256_hex("wheel bytes"));
  EXPECT_EQ(store.lookup(kKey)->wheel, e.wheel);
  EXPECT_EQ(store.list().size(), 1u);
  EXPECT_TRUE(store.verify().empty());
  // Flip a byte: verify names the entry.
  std::ofstream(e.wheel, std::ios::binary | std::ios::in) << "W";
  auto problems = store.verify();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0].key, kKey);
  EXPECT_NE(problems[0].message.find("does not match"), std::string::npos);
  store.remove(kKey).value();
  EXPECT_FALSE(store.lookup(kKey));
  // Staging leaves nothing behind.
  EXPECT_TRUE(fs::is_empty(store.tmp_root()));
}

TEST(Store, LockSerialisesOneKey) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path());
  auto first = std::make_unique<Lock>(store.lock(kKey).value());
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto second = store.lock(kKey).value();  // flock: a second open file description blocks
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(got);
  first.reset();
  t.join();
  EXPECT_TRUE(got);
}

}  // namespace kiln::cache

namespace kiln::cache {

TEST(Store, LookupVerifiedRemovesDamagedAndIncompleteEntries) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  std::string removed;
  EXPECT_FALSE(store.lookup_verified(kKey, removed));
  EXPECT_EQ(removed, "");
  Entry e =
      store
          .commit(kKey, make_wheel(dir.path() / "out", "x-1.0-py3-none-any.whl", "wheel bytes"), {})
          .value();
  EXPECT_EQ(store.lookup_verified(kKey, removed)->sha256, e.sha256);
  EXPECT_EQ(removed, "");
  std::ofstream(e.wheel, std::ios::binary | std::ios::in) << "W";  // same size, other bytes
  EXPECT_FALSE(store.lookup_verified(kKey, removed));
  EXPECT_NE(removed.find("does not match the recorded"), std::string::npos) << removed;
  EXPECT_FALSE(fs::exists(e.dir));
  // An entry without entry.json (not something commit() leaves, but a hand's or a disk's doing).
  fs::create_directories(e.dir);
  std::ofstream(e.dir / "x-1.0-py3-none-any.whl") << "wheel bytes";
  EXPECT_FALSE(store.lookup_verified(kKey, removed));
  EXPECT_EQ(removed, "the entry is incomplete");
  EXPECT_FALSE(fs::exists(e.dir));
  EXPECT_TRUE(store.commit(
      kKey, make_wheel(dir.path() / "out", "x-1.0-py3-none-any.whl", "wheel bytes"), {}));
}

TEST(Store, DamagedEntryJsonReadsAsIncompleteAndNamesNothingElsewhere) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  Entry e =
      store
          .commit(kKey, make_wheel(dir.path() / "out", "x-1.0-py3-none-any.whl", "wheel bytes"), {})
          .value();
  std::ofstream(dir.path() / "cache" / "secret.whl") << "outside the entry";
  for (const char* text :
       {"not json", "[]", R"({"wheel": 7, "sha256": "x"})", R"({"wheel": "x.whl"})",
        R"({"wheel": "../../secret.whl", "sha256": "x"})", R"({"wheel": "..", "sha256": "x"})",
        R"({"wheel": "x-1.0-py3-none-any.whl", "sha256": "x", "size": "big"})"}) {
    std::ofstream(e.dir / "entry.json", std::ios::trunc) << text;
    SCOPED_TRACE(text);
    auto found = store.lookup(kKey);
    if (found) {  // the last: a readable name and hash, an unusable size (ignored); verify rehashes
      EXPECT_EQ(found->wheel, e.wheel);
      EXPECT_EQ(found->size, 0u);
    }
    EXPECT_TRUE(store.list().size() <= 1);
    auto problems = store.verify();
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].key, kKey);
  }
}

TEST(Store, GcRemovesOnlyStagingNoLiveProcessHolds) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  auto live = store.staging("wheel-").value();
  std::ofstream(live.path() / "half.whl") << "half";
  // What a killed process left: a staging directory nobody holds, and a stray file.
  fs::create_directories(store.tmp_root() / "commit-dead");
  std::ofstream(store.tmp_root() / "commit-dead" / "entry.json") << "{}";
  std::ofstream(store.tmp_root() / "stray") << "x";
  EXPECT_EQ(store.gc(false).value(), 3u);  // the directory, its file and the stray file
  EXPECT_TRUE(fs::exists(live.path() / "half.whl"));
  EXPECT_FALSE(fs::exists(store.tmp_root() / "commit-dead"));
  EXPECT_FALSE(fs::exists(store.tmp_root() / "stray"));
}

TEST(Store, GcAllKeepsEntriesWhoseKeyABuildHolds) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string other = std::string(64, 'b');
  store.commit(kKey, make_wheel(dir.path() / "o1", "x-1.0-py3-none-any.whl", "x"), {}).value();
  store.commit(other, make_wheel(dir.path() / "o2", "y-1.0-py3-none-any.whl", "y"), {}).value();
  {
    Lock held = store.lock(kKey).value();
    EXPECT_EQ(store.gc(true).value(), 1u);  // without waiting for the lock
    EXPECT_TRUE(store.lookup(kKey));
    EXPECT_FALSE(store.lookup(other));
  }
  EXPECT_EQ(store.gc(true).value(), 1u);
  EXPECT_TRUE(store.list().empty());
}

}  // namespace kiln::cache

namespace kiln::cache {

TEST(Store, ObjectsRecordTheirSha256AndADamagedOneIsAMiss) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string key = sha256_hex("commands");
  EXPECT_EQ(store.object_path(key, ".o"), store.objects() / key.substr(0, 2) / (key + ".o"));
  EXPECT_FALSE(store.load_object(key, ".o"));
  const std::string bytes("an object\0with a NUL", 20);
  store.store_object(key, ".o", bytes).value();
  EXPECT_EQ(store.load_object(key, ".o"), bytes);
  EXPECT_FALSE(store.load_object(key, ".dev"));  // another kind of entry
  const std::string entry = read_file(store.object_path(key, ".o")).value();
  EXPECT_EQ(entry.substr(0, entry.find('\n')), "kiln-object 1 " + sha256_hex(bytes));

  // A flipped byte, a truncated entry, a missing header: each a miss, never the damaged bytes.
  std::string flipped = entry;
  flipped.back() ^= 1;
  for (const std::string& damaged : {flipped, entry.substr(0, entry.size() - 1),
                                     entry.substr(entry.find('\n') + 1), std::string()}) {
    write_file_atomic(store.object_path(key, ".o"), damaged).value();
    EXPECT_FALSE(store.load_object(key, ".o"));
  }
  // Stored again, it is whole again.
  store.store_object(key, ".o", bytes).value();
  EXPECT_EQ(store.load_object(key, ".o"), bytes);
  // Keys are sha256 digests: nothing else names a file.
  EXPECT_FALSE(store.store_object("../x", ".o", bytes));
  EXPECT_FALSE(store.load_object("../x", ".o"));
}

}  // namespace kiln::cache
