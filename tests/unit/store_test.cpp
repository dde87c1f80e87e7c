#include "cache/store.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <ctime>

#include <fstream>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

#include "cache_layout.h"

using kiln::testing::layout;

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
  Entry e = store.commit(kKey, wheel, {.package = "x", .version = "1.0"}).value();
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
  EXPECT_TRUE(fs::is_empty(layout(store).tmp_root()));
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
    EXPECT_FALSE(store.lookup(kKey));  // the last: a size that is not the file's
    EXPECT_TRUE(store.list().empty());
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
  fs::create_directories(layout(store).tmp_root() / "commit-dead");
  std::ofstream(layout(store).tmp_root() / "commit-dead" / "entry.json") << "{}";
  std::ofstream(layout(store).tmp_root() / "stray") << "x";
  // A planted link to a directory outside: the link goes, what it points at stays.
  fs::create_directories(dir.path() / "outside");
  std::ofstream(dir.path() / "outside" / "theirs") << "x";
  fs::create_symlink(dir.path() / "outside", layout(store).tmp_root() / "planted");
  GcResult removed = store.gc(false).value();
  EXPECT_EQ(removed.items, 4u);  // the directory, its file, the stray file, the link
  EXPECT_EQ(removed.bytes, 3u);  // "{}" and "x": what the link points at is not counted
  EXPECT_TRUE(fs::exists(dir.path() / "outside" / "theirs"));
  EXPECT_FALSE(fs::is_symlink(layout(store).tmp_root() / "planted"));
  EXPECT_TRUE(fs::exists(live.path() / "half.whl"));
  EXPECT_FALSE(fs::exists(layout(store).tmp_root() / "commit-dead"));
  EXPECT_FALSE(fs::exists(layout(store).tmp_root() / "stray"));
}

TEST(Store, GcAllKeepsEntriesWhoseKeyABuildHolds) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string other = std::string(64, 'b');
  store.commit(kKey, make_wheel(dir.path() / "o1", "x-1.0-py3-none-any.whl", "x"), {}).value();
  store.commit(other, make_wheel(dir.path() / "o2", "y-1.0-py3-none-any.whl", "y"), {}).value();
  const std::uint64_t other_bytes = tree_bytes(layout(store).wheels() / other);
  EXPECT_GT(other_bytes, 0u);
  {
    Lock held = store.lock(kKey).value();
    GcResult removed = store.gc(true).value();  // without waiting for the lock
    EXPECT_EQ(removed.items, 1u);
    EXPECT_EQ(removed.bytes, other_bytes);  // what gc frees is counted (it said 0.0 MiB)
    EXPECT_TRUE(store.lookup(kKey));
    EXPECT_FALSE(store.lookup(other));
  }
  EXPECT_EQ(store.gc(true).value().items, 1u);
  EXPECT_TRUE(store.list().empty());
}

}  // namespace kiln::cache

namespace kiln::cache {

TEST(Store, ObjectsRecordTheirSha256AndADamagedOneIsAMiss) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string key = sha256_hex("commands");
  EXPECT_EQ(layout(store).object_path(key, ".o"),
            layout(store).objects() / key.substr(0, 2) / (key + ".o"));
  EXPECT_FALSE(store.load_object(key, ".o"));
  const std::string bytes("an object\0with a NUL", 20);
  store.store_object(key, ".o", bytes).value();
  EXPECT_EQ(store.load_object(key, ".o"), bytes);
  EXPECT_FALSE(store.load_object(key, ".dev"));  // another kind of entry
  const std::string entry = read_file(layout(store).object_path(key, ".o")).value();
  EXPECT_EQ(entry.substr(0, entry.find('\n')), "kiln-object 1 " + sha256_hex(bytes));

  // A flipped byte, a truncated entry, a missing header: each a miss, never the damaged bytes.
  std::string flipped = entry;
  flipped.back() ^= 1;
  for (const std::string& damaged : {flipped, entry.substr(0, entry.size() - 1),
                                     entry.substr(entry.find('\n') + 1), std::string()}) {
    write_file_atomic(layout(store).object_path(key, ".o"), damaged).value();
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

namespace kiln::cache {

TEST(Store, AnEntryKeepsItsBuildsCaveats) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  EntryInfo info;
  info.caveats = {"nvcc ran outside a PID namespace", "built at /x"};
  Entry e = store.commit(kKey, make_wheel(dir.path() / "out", "x-1.0-py3-none-any.whl", "w"), info)
                .value();
  EXPECT_EQ(e.info.caveats, info.caveats);
  EXPECT_EQ(store.read_entry(kKey).entry.info.caveats, info.caveats);
  // None: no field at all (entries of older kilns read the same).
  fs::remove_all(dir.path() / "cache");
  e = store.commit(kKey, make_wheel(dir.path() / "out2", "x-1.0-py3-none-any.whl", "w"), {})
          .value();
  EXPECT_EQ(read_file(e.dir / "entry.json").value().find("caveats"), std::string::npos);
  EXPECT_TRUE(store.read_entry(kKey).entry.info.caveats.empty());
}

TEST(Store, AnAttestationIsCommittedBesideItsWheelAndReadOnlyFromTheEntry) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string name = "x-1.0-py3-none-any.whl";
  Entry e = store.commit(kKey, make_wheel(dir.path() / "out", name, "w"), {}, "{\"envelope\":1}\n")
                .value();
  EXPECT_EQ(e.attestation, e.dir / (name + ".intoto.jsonl"));
  EXPECT_EQ(e.info.attestation, name + ".intoto.jsonl");
  EXPECT_EQ(read_file(e.attestation).value(), "{\"envelope\":1}\n");
  EXPECT_EQ(store.read_attestation(e).value(), "{\"envelope\":1}\n");
  EXPECT_EQ(nlohmann::json::parse(read_file(e.dir / "entry.json").value())["attestation"],
            name + ".intoto.jsonl");

  // Gone, or a link to a file elsewhere: the entry cannot be used (a build makes it again).
  std::ofstream(dir.path() / "elsewhere") << "{}";
  fs::remove(e.attestation);
  EXPECT_EQ(store.read_entry(kKey).state, EntryRead::State::Unusable);
  fs::create_symlink(dir.path() / "elsewhere", e.attestation);
  EntryRead linked = store.read_entry(kKey);
  EXPECT_EQ(linked.state, EntryRead::State::Unusable);
  EXPECT_NE(linked.reason.find("not a regular file"), std::string::npos);
  EXPECT_FALSE(store.read_attestation(e));  // never through the link
  std::string removed;
  EXPECT_FALSE(store.lookup_verified(kKey, removed));
  EXPECT_FALSE(removed.empty());

  // Unsigned: no file, no field.
  Entry plain = store.commit(kKey, make_wheel(dir.path() / "out2", name, "w"), {}).value();
  EXPECT_TRUE(plain.attestation.empty());
  EXPECT_EQ(store.read_attestation(plain).value(), std::nullopt);
  EXPECT_EQ(read_file(plain.dir / "entry.json").value().find("attestation"), std::string::npos);

  // entry.json may name only the wheel's own attestation.
  EntryInfo info = plain.info;
  for (std::string bad : {"../x.intoto.jsonl", "entry.json", "y.whl.intoto.jsonl"}) {
    info.attestation = bad;
    EXPECT_FALSE(parse_entry_info(info.text())) << bad;
  }
}

TEST(Store, ReadEntrySaysWhyAnEntryCannotBeUsed) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  using State = EntryRead::State;
  EXPECT_EQ(store.read_entry(kKey).state, State::Missing);
  const std::string name = "x-1.0-py3-none-any.whl";
  Entry e = store.commit(kKey, make_wheel(dir.path() / "out", name, "wheel bytes"), {}).value();
  EntryRead whole = store.read_entry(kKey);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole.entry.wheel, e.wheel);
  EXPECT_EQ(whole.entry.size, 11u);
  EXPECT_EQ(whole.entry.sha256, sha256_hex("wheel bytes"));
  const std::string good = read_file(e.dir / "entry.json").value();
  const nlohmann::json info = nlohmann::json::parse(good);
  auto with = [&](const char* field, nlohmann::json value) {
    nlohmann::json changed = info;
    changed[field] = std::move(value);
    return changed.dump();
  };
  std::ofstream(dir.path() / "cache" / "secret.whl") << "outside the entry";
  fs::create_symlink(dir.path() / "cache" / "secret.whl", e.dir / "linked.whl");
  // A (entry.json text, reason) per shape; the entry's wheel itself stays as committed.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "entry.json is not a JSON object"},
      {"[1]", "entry.json is not a JSON object"},
      {with("wheel", 7), "entry.json: 'wheel' is not a string"},
      {with("wheel", "../secret.whl"), "entry.json names no plain .whl file ('../secret.whl')"},
      {with("wheel", "x-1.0-py3-none-any.tar"),
       "entry.json names no plain .whl file ('x-1.0-py3-none-any.tar')"},
      {with("wheel", "y.whl"), "y.whl is missing or not a regular file"},
      {with("wheel", "linked.whl"), "linked.whl is missing or not a regular file"},
      {with("size", 12), name + ": size 11 is not the recorded 12"},
      {with("size", "big"), "entry.json: 'size' is not a non-negative integer"},
      {with("size", -11), "entry.json: 'size' is not a non-negative integer"},
      {with("sha256", "x"), "entry.json records no sha256"},
      {with("sha256", 456), "entry.json: 'sha256' is not a string"},
      // Every field typed and bounded (one reader for local and remote entries): a wrong type,
      // an escape sequence, a list of 700k archs, a key of another entry.
      {with("version", 5), "entry.json: 'version' is not a string"},
      {with("version", "\x1b[2J\r\n"),
       "entry.json: 'version' holds a control character or invalid UTF-8"},
      {with("archs", nlohmann::json(std::vector<std::string>(700000, "sm_90"))),
       "entry.json is larger than 65536 bytes"},
      {with("archs", nlohmann::json::array()), "entry.json: 'archs' is not a string"},
      {with("target", std::string(1025, 't')), "entry.json: 'target' is longer than 1024 bytes"},
      {with("committed_at", 1.5), "entry.json: 'committed_at' is not a non-negative integer"},
      {with("key", std::string(64, 'b')), "entry.json names another build key (bbbbbbbbbbbbbbbb)"},
      {with("caveats", "one"), "entry.json: 'caveats' is not an array of at most 8 strings"},
      {with("caveats", nlohmann::json(std::vector<std::string>(9, "c"))),
       "entry.json: 'caveats' is not an array of at most 8 strings"},
      {with("caveats", nlohmann::json::array({"fine", 2})),
       "entry.json: 'caveats' is not a string"},
      {with("caveats", nlohmann::json::array({"\x1b]0;title\x07"})),
       "entry.json: 'caveats' holds a control character or invalid UTF-8"},
  };
  for (const auto& [text, reason] : cases) {
    SCOPED_TRACE(text);
    write_file_atomic(e.dir / "entry.json", text).value();
    EntryRead read = store.read_entry(kKey);
    EXPECT_EQ(read.state, State::Unusable);
    EXPECT_EQ(read.reason, reason);
    EXPECT_FALSE(store.lookup(kKey));
    auto problems = store.verify();  // verify names the same reason
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].message, reason);
  }
  // entry.json a symlink (to a whole entry.json elsewhere): not followed.
  std::ofstream(dir.path() / "elsewhere.json") << good;
  fs::remove(e.dir / "entry.json");
  fs::create_symlink(dir.path() / "elsewhere.json", e.dir / "entry.json");
  EXPECT_EQ(store.read_entry(kKey).reason, "entry.json is not a regular file");
  // No entry.json: incomplete, nothing more to say.
  fs::remove(e.dir / "entry.json");
  EXPECT_EQ(store.read_entry(kKey).state, State::Incomplete);
  // The entry directory a symlink to a whole entry elsewhere.
  write_file_atomic(e.dir / "entry.json", good).value();
  fs::rename(e.dir, dir.path() / "moved");
  fs::create_directory_symlink(dir.path() / "moved", e.dir);
  EXPECT_EQ(store.read_entry(kKey).reason, "not a directory (symlinks are not followed)");
  // lookup_verified removes it (the link, not what it points to) and says why.
  std::string removed;
  EXPECT_FALSE(store.lookup_verified(kKey, removed));
  EXPECT_EQ(removed, "not a directory (symlinks are not followed)");
  EXPECT_FALSE(fs::exists(fs::symlink_status(e.dir)));
  EXPECT_TRUE(fs::exists(dir.path() / "moved" / name));
}

// Where the Store puts what it is asked for: the names every kiln before used (a cache made by one
// keeps working, and no build key changes).
TEST(Store, KeepsWhatItMakesWhereEveryKilnBeforeKeptIt) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  const fs::path c = dir.path() / "c";
  Store store(c);
  const std::string sha = sha256_hex("a wheel");
  auto lock = store.lock(kKey).value();
  EXPECT_TRUE(fs::exists(c / "locks" / (kKey + ".lock")));
  LastBuild last{"default", "causal_conv1d", kKey, "x-1.0-py3-none-any.whl", "native", {}};
  ASSERT_TRUE(store.record_last(last));
  EXPECT_TRUE(fs::is_regular_file(c / "last" / "default" / "causal_conv1d.json"));
  auto slot = store.download_slot(sha, "torch-2.11.0-cp312-cp312-linux_x86_64.whl").value();
  EXPECT_EQ(slot.file(),
            c / "downloads" / sha.substr(0, 2) / sha / "torch-2.11.0-cp312-cp312-linux_x86_64.whl");
  const std::string url = "https://github.com/Dao-AILab/causal-conv1d";
  EXPECT_EQ(store.git_mirror(url).value().path(), c / "git" / sha256_hex(url));
  auto made = [&](const MadeOnce& what) {
    return store
        .ensure(what,
                [&](const fs::path& d, const fs::path&) -> Expected<void> {
                  fs::create_directories((d / what.marker).parent_path());
                  return write_file_atomic(d / what.marker, "x");
                })
        .value();
  };
  EXPECT_EQ(made(torch_sysroot(sha)), c / "sysroots" / cat("torch-", sha.substr(0, 16)));
  EXPECT_EQ(made(wheel_toolkit("13.0", sha)),
            c / "toolkits" / cat("cuda-13.0-", sha.substr(0, 16)));
  EXPECT_EQ(made(debian_toolkit("12.4", sha)),
            c / "toolkits" / cat("cuda-12.4-debian-", sha.substr(0, 16)));
  EXPECT_EQ(made(setuptools_env(sha)), c / "envs" / cat("setuptools-", sha.substr(0, 16)));
}

// A download refused as hostile goes with its <sha256> directory; nothing else is removed.
TEST(Store, DiscardsADownloadAndNothingElse) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path());
  const std::string sha = sha256_hex("an sdist");
  fs::path file = layout(store).download_path(sha, "x-1.0.tar.gz");
  write_file_atomic(file, "bytes").value();
  fs::path other = layout(store).download_path(sha256_hex("another"), "y-1.0.tar.gz");
  write_file_atomic(other, "bytes").value();
  fs::path outside = dir.path() / "elsewhere" / "ab" / sha / "x-1.0.tar.gz";
  write_file_atomic(outside, "bytes").value();
  EXPECT_FALSE(store.discard_download(outside));  // not in this cache's downloads/
  EXPECT_FALSE(store.discard_download(dir.path() / "downloads" / "zz" / sha / "x-1.0.tar.gz"));
  EXPECT_FALSE(store.discard_download(file.parent_path()));  // the directory is no download
  EXPECT_TRUE(fs::exists(outside));
  EXPECT_TRUE(fs::exists(file));
  EXPECT_TRUE(store.discard_download(file));
  EXPECT_FALSE(fs::exists(file.parent_path()));
  EXPECT_TRUE(fs::exists(file.parent_path().parent_path()));
  EXPECT_TRUE(fs::exists(other));
}

// last/<target>/<package>.json: written only when it changes (then last/ itself changes too),
// read back whole; an older kiln's record (the inputs alone), a link or garbage name no entry.
TEST(Store, RecordsAndReadsTheLastBuild) {
  auto dir = kiln::TempDir::create(fs::temp_directory_path(), "store-last-").value();
  Store store(dir.path());
  kiln::cache::LastBuild last{
      "default", "demo", kKey, "demo-1.0-py3-none-any.whl", "pure", nlohmann::json{{"recipe", 4}}};
  ASSERT_TRUE(store.record_last(last));
  auto changed = fs::last_write_time(layout(store).last_root() / ".changed");
  ASSERT_TRUE(store.record_last(last));  // the same: nothing written
  EXPECT_EQ(fs::last_write_time(layout(store).last_root() / ".changed"), changed);
  auto read = store.read_last("default", "demo");
  ASSERT_TRUE(read);
  EXPECT_EQ(read->key, kKey);
  EXPECT_EQ(read->wheel, "demo-1.0-py3-none-any.whl");
  EXPECT_EQ(read->backend, "pure");
  EXPECT_EQ(read->inputs, (nlohmann::json{{"recipe", 4}}));
  ASSERT_EQ(store.last_builds().size(), 1u);

  const fs::path d = layout(store).last_root() / "default";
  kiln::write_file_atomic(d / "old.json", R"({"recipe": 3})").value();
  auto old = store.read_last("default", "old");
  ASSERT_TRUE(old);
  EXPECT_EQ(old->key, "");
  EXPECT_EQ(old->inputs, (nlohmann::json{{"recipe", 3}}));
  kiln::write_file_atomic(d / "bad.json",
                          R"({"kiln_last": 1, "build": {"key": "../x", "wheel": "../a.whl"}})")
      .value();
  EXPECT_EQ(store.read_last("default", "bad")->key, "");
  kiln::write_file_atomic(d / "garbage.json", "[").value();
  EXPECT_FALSE(store.read_last("default", "garbage"));
  fs::create_symlink(d / "demo.json", d / "link.json");
  EXPECT_FALSE(store.read_last("default", "link"));
  EXPECT_FALSE(store.read_last("..", "demo"));
  EXPECT_EQ(store.last_builds().size(), 1u);  // only the record that names an entry
}

// A FIFO where an object belongs would block a build that read it; a link would lead out of the
// cache. Both are misses, removed (the link, not what it names), and the read never blocks.
TEST(Store, AnObjectThatIsNoRegularFileIsAMissAndRemoved) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string fifo = sha256_hex("fifo"), link = sha256_hex("link");
  fs::create_directories(layout(store).object_path(fifo, ".o").parent_path());
  fs::create_directories(layout(store).object_path(link, ".o").parent_path());
  ASSERT_EQ(::mkfifo(layout(store).object_path(fifo, ".o").c_str(), 0644), 0);
  const fs::path outside = dir.path() / "outside";
  write_file_atomic(outside, "not an object").value();
  fs::create_symlink(outside, layout(store).object_path(link, ".o"));
  EXPECT_FALSE(store.load_object(fifo, ".o"));
  EXPECT_FALSE(store.load_object(link, ".o"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(layout(store).object_path(fifo, ".o"))));
  EXPECT_FALSE(fs::exists(fs::symlink_status(layout(store).object_path(link, ".o"))));
  EXPECT_EQ(read_file(outside).value(), "not an object");
}

TEST(Store, VerifyReportsDamagedObjectsAndGcRemovesThem) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  const std::string good = sha256_hex("good"), bad = sha256_hex("bad"), gone = sha256_hex("gone");
  store.store_object(good, ".o", "good bytes").value();
  store.store_object(bad, ".dev", "bad bytes").value();
  store.store_object(gone, ".o", "gone bytes").value();
  // A temporary of a store_object in flight is no entry.
  std::ofstream(layout(store).object_path(good, ".o").parent_path() / ("." + good + ".o.tmp-abc"))
      << "x";
  // An entry from a kiln whose objects had no header: stale, not damage.
  const std::string old = sha256_hex("old");
  fs::create_directories(layout(store).object_path(old, ".o").parent_path());
  std::ofstream(layout(store).object_path(old, ".o")) << "\177ELF raw object";
  ObjectsVerified v = store.verify_objects();
  EXPECT_TRUE(v.damaged.empty());
  EXPECT_EQ(v.stale, std::vector<std::string>{cat("objects/", old.substr(0, 2), "/", old, ".o")});
  EXPECT_EQ(v.checked, 4u);
  // Objects are not wheel entries.
  EXPECT_TRUE(store.verify().empty());
  EXPECT_TRUE(store.list().empty());

  auto flip = [&](const std::string& key, const char* suffix) {
    std::string entry = read_file(layout(store).object_path(key, suffix)).value();
    entry.back() ^= 1;
    write_file_atomic(layout(store).object_path(key, suffix), entry).value();
  };
  flip(bad, ".dev");
  flip(gone, ".o");
  v = store.verify_objects();
  EXPECT_EQ(v.checked, 4u);
  ASSERT_EQ(v.damaged.size(), 2u);
  EXPECT_LT(v.damaged[0].key, v.damaged[1].key);
  for (const auto& p : v.damaged) {
    EXPECT_TRUE(p.key == cat("objects/", bad.substr(0, 2), "/", bad, ".dev") ||
                p.key == cat("objects/", gone.substr(0, 2), "/", gone, ".o"))
        << p.key;
    EXPECT_NE(p.message.find("do not match the sha256 its header records"), std::string::npos)
        << p.message;
  }
  // A build that finds a damaged object removes it (and stores it anew).
  EXPECT_FALSE(store.load_object(gone, ".o"));
  EXPECT_FALSE(fs::exists(layout(store).object_path(gone, ".o")));
  // gc removes the damaged and the stale ones, and keeps the whole ones and the temporary.
  EXPECT_EQ(store.gc(false).value().items, 2u);
  EXPECT_FALSE(fs::exists(layout(store).object_path(bad, ".dev")));
  EXPECT_FALSE(fs::exists(layout(store).object_path(old, ".o")));
  EXPECT_EQ(store.load_object(good, ".o"), "good bytes");
  v = store.verify_objects();
  EXPECT_TRUE(v.damaged.empty() && v.stale.empty());
  EXPECT_EQ(v.checked, 1u);
  // gc --all removes every object entry.
  EXPECT_EQ(store.gc(true).value().items, 1u);
  EXPECT_FALSE(fs::exists(layout(store).object_path(good, ".o")));
}

}  // namespace kiln::cache

namespace kiln::cache {

namespace {

// Sets a file's (or a link's own) mtime, as a build's use long ago would have left it.
void set_mtime(const fs::path& path, std::time_t when) {
  struct timespec times[2] = {{when, 0}, {when, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

std::time_t mtime_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mtime;
}

std::uint64_t dir_bytes(const fs::path& dir) {
  std::uint64_t total = 0;
  for (const auto& f : fs::directory_iterator(dir)) total += fs::file_size(f.path());
  return total;
}

constexpr std::time_t kNow = 1'700'000'000;
constexpr std::time_t kDay = 86400;

// A cache with wheel entries and objects whose last use a test sets.
struct EvictFixture {
  TempDir dir = TempDir::create(fs::temp_directory_path(), "kiln-evict-").value();
  Store store{dir.path() / "cache"};

  // An entry of `key` holding `bytes` bytes of wheel, last used at `used`; its bytes on disk.
  std::uint64_t wheel(const std::string& key, std::size_t bytes, std::time_t used) {
    fs::path w =
        make_wheel(dir.path() / "out" / key, "x-1.0-py3-none-any.whl", std::string(bytes, 'w'));
    Entry e = store.commit(key, w, {.package = "x"}).value();
    set_mtime(e.dir / "entry.json", used);
    return dir_bytes(e.dir);
  }
  std::uint64_t object(const std::string& key, const char* suffix, std::size_t bytes,
                       std::time_t used) {
    store.store_object(key, suffix, std::string(bytes, 'o')).value();
    set_mtime(layout(store).object_path(key, suffix), used);
    return fs::file_size(layout(store).object_path(key, suffix));
  }
  bool has_wheel(const std::string& key) const { return fs::exists(layout(store).wheels() / key); }
  bool has_object(const std::string& key, const char* suffix) const {
    return fs::exists(layout(store).object_path(key, suffix));
  }
};

const std::string kA = sha256_hex("a"), kB = sha256_hex("b"), kC = sha256_hex("c");
const std::string kO1 = sha256_hex("o1"), kO2 = sha256_hex("o2"), kO3 = sha256_hex("o3");

}  // namespace

TEST(StoreEvict, ByAgeRemovesWhatNoBuildUsedSince) {
  EvictFixture f;
  std::uint64_t a = f.wheel(kA, 100, kNow - 40 * kDay);
  std::uint64_t b = f.wheel(kB, 100, kNow - 10 * kDay);
  std::uint64_t c = f.wheel(kC, 100, kNow + kDay);  // a clock ahead: not old
  std::uint64_t o1 = f.object(kO1, ".o", 50, kNow - 31 * kDay);
  std::uint64_t o2 = f.object(kO2, ".dev", 50, kNow - 29 * kDay);
  std::uint64_t o3 = f.object(kO3, ".deps", 50, kNow - 30 * kDay);  // exactly 30 days: kept

  // An empty policy measures.
  EvictResult measured = f.store.evict({}, kNow).value();
  EXPECT_EQ(measured.removed_wheels + measured.removed_objects, 0u);
  EXPECT_EQ(measured.remaining_bytes, a + b + c + o1 + o2 + o3);

  EvictResult r = f.store.evict({.max_age = 30 * kDay}, kNow).value();
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_EQ(r.removed_objects, 1u);
  EXPECT_EQ(r.freed_bytes, a + o1);
  EXPECT_EQ(r.remaining_bytes, b + c + o2 + o3);
  EXPECT_TRUE(r.kept_locked.empty());
  EXPECT_FALSE(f.has_wheel(kA));
  EXPECT_FALSE(f.has_object(kO1, ".o"));
  EXPECT_TRUE(f.has_wheel(kB) && f.has_wheel(kC));
  EXPECT_TRUE(f.has_object(kO2, ".dev") && f.has_object(kO3, ".deps"));
  // Removed whole (renamed out of wheels/ first): no staging or half entry left.
  EXPECT_TRUE(fs::is_empty(layout(f.store).tmp_root()));
  EXPECT_EQ(f.store.keys(), (std::vector<std::string>{std::min(kB, kC), std::max(kB, kC)}));
  EXPECT_TRUE(f.store.verify().empty());
  EXPECT_EQ(f.store.load_object(kO2, ".dev"), std::string(50, 'o'));
  // What an age of 0 leaves: only what is used "in the future".
  r = f.store.evict({.max_age = 0}, kNow).value();
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_EQ(r.removed_objects, 1u);  // o3; o2 was used just now (load_object)
  EXPECT_EQ(r.remaining_bytes, c + o2);
}

TEST(StoreEvict, BySizeRemovesTheLeastRecentlyUsedFirst) {
  EvictFixture f;
  std::uint64_t a = f.wheel(kA, 1000, kNow - 5 * kDay);
  std::uint64_t b = f.wheel(kB, 1000, kNow - 1 * kDay);
  std::uint64_t o1 = f.object(kO1, ".o", 1000, kNow - 3 * kDay);
  // A tie in time: "objects/…" before "wheels/…".
  std::uint64_t c = f.wheel(kC, 1000, kNow - 4 * kDay);
  std::uint64_t o2 = f.object(kO2, ".o", 1000, kNow - 4 * kDay);
  std::uint64_t o3 = f.object(kO3, ".o", 1000, kNow - 2 * kDay);
  const std::uint64_t total = a + b + c + o1 + o2 + o3;

  // Already below: nothing goes.
  EvictResult r = f.store.evict({.max_bytes = total}, kNow).value();
  EXPECT_EQ(r.removed_wheels + r.removed_objects, 0u);
  EXPECT_EQ(r.remaining_bytes, total);
  // One byte less: the oldest, a.
  r = f.store.evict({.max_bytes = total - 1}, kNow).value();
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_EQ(r.freed_bytes, a);
  EXPECT_FALSE(f.has_wheel(kA));
  // Then o2 (the tie, by name), then c, then o1; b and o3 stay.
  r = f.store.evict({.max_bytes = b + o3 + o1 - 1}, kNow).value();
  EXPECT_EQ(r.removed_objects, 2u);
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_EQ(r.freed_bytes, o2 + c + o1);
  EXPECT_EQ(r.remaining_bytes, b + o3);
  EXPECT_LE(r.remaining_bytes, b + o3 + o1 - 1);
  EXPECT_TRUE(f.has_wheel(kB) && f.has_object(kO3, ".o"));
  EXPECT_FALSE(f.has_wheel(kC) || f.has_object(kO1, ".o") || f.has_object(kO2, ".o"));
  // Age first, then size: the age takes o3 (2 days), the size then b.
  r = f.store.evict({.max_age = kDay + 3600, .max_bytes = 0}, kNow).value();
  EXPECT_EQ(r.removed_objects, 1u);
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_EQ(r.remaining_bytes, 0u);
  EXPECT_TRUE(f.store.keys().empty());
  EXPECT_TRUE(f.store.object_files().empty());
}

TEST(StoreEvict, KeepsAndNamesAnEntryABuildHolds) {
  EvictFixture f;
  std::uint64_t a = f.wheel(kA, 100, kNow - 9 * kDay);
  f.wheel(kB, 100, kNow - 8 * kDay);
  f.object(kO1, ".o", 100, kNow - 7 * kDay);
  {
    Lock held = f.store.lock(kA).value();
    EvictResult r = f.store.evict({.max_age = kDay, .max_bytes = 0}, kNow).value();
    EXPECT_EQ(r.kept_locked, std::vector<std::string>{kA});  // named once, not per phase
    EXPECT_EQ(r.removed_wheels, 1u);
    EXPECT_EQ(r.removed_objects, 1u);
    EXPECT_EQ(r.remaining_bytes, a);  // counted: still there
    EXPECT_TRUE(f.has_wheel(kA));
    EXPECT_TRUE(f.store.lookup(kA));
  }
  EvictResult r = f.store.evict({.max_bytes = 0}, kNow).value();
  EXPECT_TRUE(r.kept_locked.empty());
  EXPECT_EQ(r.removed_wheels, 1u);
  EXPECT_FALSE(f.has_wheel(kA));
}

TEST(StoreEvict, ABuildsHitMarksTheEntryUsed) {
  EvictFixture f;
  f.wheel(kA, 100, kNow - 9 * kDay);
  f.object(kO1, ".o", 100, kNow - 9 * kDay);
  const fs::path json = layout(f.store).wheels() / kA / "entry.json";
  const fs::path object = layout(f.store).object_path(kO1, ".o");
  // Readers that are not a build's hit leave the last use as it was.
  EXPECT_TRUE(f.store.lookup(kA));
  EXPECT_EQ(f.store.list().size(), 1u);
  EXPECT_TRUE(f.store.verify().empty());
  EXPECT_TRUE(f.store.verify_objects().damaged.empty());
  EXPECT_EQ(f.store.gc(false).value().items, 0u);
  EXPECT_EQ(mtime_of(json), kNow - 9 * kDay);
  EXPECT_EQ(mtime_of(object), kNow - 9 * kDay);
  // A miss marks nothing.
  EXPECT_FALSE(f.store.load_object(kO2, ".o"));
  // Hits do.
  const std::time_t before = std::time(nullptr);
  std::string removed;
  EXPECT_TRUE(f.store.lookup_verified(kA, removed));
  EXPECT_EQ(f.store.load_object(kO1, ".o"), std::string(100, 'o'));
  EXPECT_GE(mtime_of(json), before);
  EXPECT_GE(mtime_of(object), before);
  // So an age eviction now keeps them.
  EvictResult r = f.store.evict({.max_age = kDay}, std::time(nullptr)).value();
  EXPECT_EQ(r.removed_wheels + r.removed_objects, 0u);
}

// A stranger's cache: links and other files where entries belong are removed themselves, never
// what they name; a name that is no build key is left alone; nothing outside the cache changes.
TEST(StoreEvict, NeverFollowsALinkOutOfTheCache) {
  EvictFixture f;
  const fs::path outside = f.dir.path() / "outside";
  write_file_atomic(outside / "dir" / "entry.json", "{}").value();
  write_file_atomic(outside / "file", "precious").value();
  set_mtime(outside / "file", kNow - 100 * kDay);
  fs::create_directories(layout(f.store).wheels());
  fs::create_directory_symlink(outside / "dir",
                               layout(f.store).wheels() / kA);  // an entry as a link
  f.wheel(kB, 10, kNow);  // an entry whose entry.json and wheel are links
  for (const char* name : {"entry.json", "x-1.0-py3-none-any.whl"}) {
    fs::remove(layout(f.store).wheels() / kB / name);
    fs::create_symlink(outside / "file", layout(f.store).wheels() / kB / name);
  }
  fs::create_directories(layout(f.store).wheels() / "not-a-key");
  std::ofstream(layout(f.store).wheels() / "not-a-key" / "x") << "junk";
  fs::create_directories(layout(f.store).object_path(kO1, ".o").parent_path());
  fs::create_symlink(outside / "file",
                     layout(f.store).object_path(kO1, ".o"));  // an object as a link
  fs::create_directory_symlink(outside / "dir",
                               layout(f.store).objects() / "ff");  // a shard as a link
  fs::create_directories(layout(f.store).object_path(kO3, ".o").parent_path());
  ASSERT_EQ(::mkfifo(layout(f.store).object_path(kO3, ".o").c_str(), 0644),
            0);  // not a regular file
  // A 255-byte name (too long for store_object's temporary: a stranger's, or another tool's).
  const std::string long_suffix = "." + std::string(190, 'x');
  fs::create_directories(layout(f.store).object_path(kO2, long_suffix).parent_path());
  std::ofstream(layout(f.store).object_path(kO2, long_suffix))
      << "kiln-object 1 " << sha256_hex("x") << "\nx";

  // Everything is older than a day from now: the age takes what it may (links count 0 bytes).
  EvictResult r = f.store.evict({.max_age = 0, .max_bytes = 0}, std::time(nullptr) + kDay).value();
  EXPECT_EQ(r.removed_wheels, 2u);   // the link, and the entry of links
  EXPECT_EQ(r.removed_objects, 1u);  // the long name; the link and the FIFO are no entries
  EXPECT_EQ(r.remaining_bytes, 0u);
  EXPECT_FALSE(fs::exists(fs::symlink_status(layout(f.store).wheels() / kA)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(layout(f.store).wheels() / kB)));
  EXPECT_FALSE(f.has_object(kO2, long_suffix.c_str()));
  EXPECT_TRUE(fs::exists(layout(f.store).wheels() / "not-a-key" / "x"));
  EXPECT_EQ(read_file(outside / "file").value(), "precious");
  EXPECT_EQ(mtime_of(outside / "file"), kNow - 100 * kDay);
  EXPECT_TRUE(fs::exists(outside / "dir" / "entry.json"));
  EXPECT_TRUE(fs::exists(fs::symlink_status(layout(f.store).objects() / "ff")));
  EXPECT_TRUE(fs::exists(fs::symlink_status(layout(f.store).object_path(kO1, ".o"))));
  EXPECT_TRUE(fs::exists(fs::symlink_status(layout(f.store).object_path(kO3, ".o"))));
  EXPECT_TRUE(fs::is_empty(layout(f.store).tmp_root()));
  // Only what is beside wheels/ and objects/ is "other", links not followed.
  fs::create_directory_symlink(outside, f.store.root() / "downloads");
  EXPECT_EQ(f.store.other_bytes(), 0u);
  fs::remove(f.store.root() / "downloads");
  write_file_atomic(f.store.root() / "downloads" / "ab" / "x.tar.gz", "12345").value();
  EXPECT_EQ(f.store.other_bytes(), 5u);
}

}  // namespace kiln::cache

namespace kiln::cache {

// gc and evict act only on a kiln cache: one kiln marked (CACHEDIR.TAG with kiln's line), or one
// from before the tag whose every top-level name is kiln's (it is marked then). A path that names
// another directory (a typo, a NUL-cut configuration value) is refused and left as it was.
TEST(Store, OnlyAKilnCacheIsCollected) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  // Missing or empty: nothing to act on, no error, nothing made.
  EXPECT_TRUE(Store(dir.path() / "missing").gc(true));
  EXPECT_FALSE(fs::exists(dir.path() / "missing"));
  fs::create_directories(dir.path() / "empty");
  EXPECT_TRUE(Store(dir.path() / "empty").evict({}, std::time(nullptr)));
  EXPECT_FALSE(fs::exists(dir.path() / "empty" / "CACHEDIR.TAG"));

  // Somebody's directory: refused by gc, evict and the build roots' gc; nothing removed.
  fs::path victim = dir.path() / "victim";
  fs::create_directories(victim / "tmp");
  fs::create_directories(victim / "wheels" / kKey);
  std::ofstream(victim / "tmp" / "notes") << "mine";
  std::ofstream(victim / "wheels" / kKey / "data") << "mine";
  std::ofstream(victim / "thesis.tex") << "mine";
  Store foreign(victim);
  auto gc = foreign.gc(true);
  ASSERT_FALSE(gc);
  EXPECT_EQ(gc.error().kind, ErrorKind::BadInput);
  EXPECT_NE(gc.error().message.find(cat(victim.string(),
                                        " is not a kiln cache: no CACHEDIR.TAG of kiln's, and it "
                                        "holds 'thesis.tex', which kiln never makes")),
            std::string::npos)
      << gc.error().message;
  EvictPolicy all;
  all.max_bytes = 0;
  EXPECT_FALSE(foreign.evict(all, std::time(nullptr)));
  EXPECT_TRUE(fs::exists(victim / "tmp" / "notes"));
  EXPECT_TRUE(fs::exists(victim / "wheels" / kKey / "data"));
  EXPECT_FALSE(fs::exists(victim / "CACHEDIR.TAG"));
  // Only kiln's names, but none of the folders only a kiln cache has: refused too.
  fs::path bare = dir.path() / "bare";
  fs::create_directories(bare / "tmp");
  fs::create_directories(bare / "build");
  EXPECT_NE(Store(bare).gc(false).error().message.find("it has none of kiln's folders"),
            std::string::npos);
  // Another tool's tag does not make a kiln cache.
  std::ofstream(bare / "CACHEDIR.TAG") << "Signature: 8a477f597d28d172789f06886806bc55\n";
  EXPECT_FALSE(Store(bare).gc(false));

  // A cache from before the tag (kiln's layout only): collected, and marked.
  fs::path legacy = dir.path() / "legacy";
  Store old(legacy);
  old.commit(kKey, make_wheel(dir.path() / "o", "x-1.0-py3-none-any.whl", "x"), {}).value();
  fs::create_directories(legacy / "downloads");
  std::ofstream(legacy / ".gitkeep");
  EXPECT_EQ(old.gc(true).value().items, 1u);
  std::string tag = read_file(legacy / "CACHEDIR.TAG", 4096).value();
  EXPECT_TRUE(tag.starts_with("Signature: 8a477f597d28d172789f06886806bc55\n")) << tag;
  EXPECT_NE(tag.find("created by kiln"), std::string::npos);
  // A marked cache is kiln's whatever else a user put in it.
  std::ofstream(legacy / "README") << "notes";
  EXPECT_TRUE(old.gc(true));
  EXPECT_TRUE(fs::exists(legacy / "README"));
  // A cache whose shared parts are links to another cache's (downloads/, sysroots/): kiln's.
  fs::path sharing = dir.path() / "sharing";
  fs::create_directories(sharing);
  fs::create_directory_symlink(legacy / "downloads", sharing / "downloads");
  EXPECT_TRUE(Store(sharing).gc(false));
  EXPECT_TRUE(fs::exists(sharing / "CACHEDIR.TAG"));

  // mark() makes the directory and the tag, once; a tag link is never followed or replaced.
  fs::path fresh = dir.path() / "fresh";
  Store(fresh).mark().value();
  EXPECT_EQ(read_file(fresh / "CACHEDIR.TAG", 4096).value(), tag);
  Store(fresh).mark().value();
  fs::path linked = dir.path() / "linked";
  fs::create_directories(linked);
  fs::create_symlink(dir.path() / "victim" / "thesis.tex", linked / "CACHEDIR.TAG");
  Store(linked).mark().value();
  EXPECT_TRUE(fs::is_symlink(linked / "CACHEDIR.TAG"));
  EXPECT_EQ(read_file(victim / "thesis.tex", 4096).value(), "mine");
  EXPECT_FALSE(Store(linked).recognise());  // a link is no tag: a file 'CACHEDIR.TAG' only
}

}  // namespace kiln::cache

namespace kiln::cache {

// gc reclaims what a failed or killed git fetch left in <cache>/git: a mirror that pins no commit,
// a temporary pack in one that does; a mirror a fetch holds, and names that are not kiln's, stay.
TEST(Store, GcReclaimsWhatFailedGitFetchesLeft) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-store-").value();
  Store store(dir.path() / "cache");
  store.mark().value();
  const std::string pin(40, 'c');
  fs::path pinned = layout(store).git_mirror("https://example.org/pinned.git");
  fs::path packed = layout(store).git_mirror("https://example.org/packed.git");
  fs::path failed = layout(store).git_mirror("https://example.org/failed.git");
  fs::path held = layout(store).git_mirror("https://example.org/held.git");
  for (const fs::path& m : {pinned, packed, failed, held}) {
    fs::create_directories(m / "objects" / "pack");
    fs::create_directories(m / "refs" / "kiln");
    std::ofstream(m / "HEAD") << "ref: refs/heads/main\n";
  }
  std::ofstream(pinned / "refs" / "kiln" / pin) << pin << "\n";
  std::ofstream(pinned / "objects" / "pack" / "pack-1.pack") << "pack";
  std::ofstream(pinned / "objects" / "pack" / "pack_git2_a1b2c3") << std::string(1000, 'x');
  std::ofstream(packed / "packed-refs") << "# pack-refs with: peeled\n"
                                        << pin << " refs/kiln/" << pin << "\n";
  std::ofstream(failed / "objects" / "pack" / "pack_git2_zzzzzz") << std::string(5000, 'x');
  std::ofstream(held / "objects" / "pack" / "pack_git2_yyyyyy") << "x";
  fs::create_directories(store.root() / "git" / "notes");  // not a mirror's name: left alone
  GcResult removed;
  {
    auto lock = FileLock::try_acquire(held);  // a fetch in progress
    ASSERT_TRUE(lock);
    removed = store.gc(false).value();
  }
  EXPECT_EQ(removed.items, 2u);  // the failed mirror (one entry), the temporary pack
  EXPECT_GE(removed.bytes, 6000u);
  EXPECT_FALSE(fs::exists(failed));
  EXPECT_FALSE(fs::exists(pinned / "objects" / "pack" / "pack_git2_a1b2c3"));
  EXPECT_TRUE(fs::exists(pinned / "objects" / "pack" / "pack-1.pack"));
  EXPECT_TRUE(fs::exists(packed / "HEAD"));
  EXPECT_TRUE(fs::exists(held / "objects" / "pack" / "pack_git2_yyyyyy"));
  EXPECT_TRUE(fs::exists(store.root() / "git" / "notes"));
  // Once the fetch let go, its mirror goes too (it pins nothing).
  EXPECT_EQ(store.gc(false).value().items, 1u);
  EXPECT_FALSE(fs::exists(held));
}

}  // namespace kiln::cache
