// The shared remote cache's policy (cache::SharedCache over an in-memory remote), the local store
// in front of it, and where a build's remote and its token come from (remote::load_config,
// kiln.toml). The real servers are tests/e2e/test_remote_cache.py's.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <map>

#include "cache/remote.h"
#include "cache/store.h"
#include "compile/content_key.h"
#include "compile/object_cache.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "remote/remote.h"

namespace kiln {

namespace fs = std::filesystem;

namespace {

// A remote in memory; `down` makes every call fail, as a server that is gone.
class MemoryRemote final : public cache::Remote {
 public:
  std::string describe() const override { return "memory://"; }
  Expected<cache::Fetched> get(const std::string& name, std::uint64_t max_bytes) override {
    calls++;
    if (down) return Error::failed("connection refused");
    auto it = entries.find(name);
    if (it == entries.end()) return cache::Fetched::missing();
    if (it->second.size() > max_bytes) return cache::Fetched::too_large("over the bound");
    return cache::Fetched::found(it->second);
  }
  Expected<void> put(const std::string& name, std::string_view bytes) override {
    calls++;
    if (down) return Error::failed("connection refused");
    entries[name] = bytes;
    return {};
  }
  std::map<std::string, std::string> entries;
  bool down = false;
  int calls = 0;
};

struct Fixture {
  Fixture() : dir(TempDir::create(fs::temp_directory_path(), "kiln-remote-").value()) {
    auto owned = std::make_unique<MemoryRemote>();
    remote = owned.get();
    shared = std::make_shared<cache::SharedCache>(std::move(owned), false);
  }
  TempDir dir;
  MemoryRemote* remote;
  std::shared_ptr<cache::SharedCache> shared;
};

// A store on the fixture's remote, which offers it the wheel entry of one key.
struct WheelOffers : Fixture {
  WheelOffers() {
    store.set_shared(shared);
    fs::create_directories(into);
  }
  // `info` as the remote's entry.json for `key`, then the store's fetch of it into `into`.
  std::optional<cache::Store::SharedWheel> offer(const nlohmann::json& info) {
    shared->put(cache::remote_wheel_info_name(key), info.dump());
    return store.fetch_shared_wheel(key, into);
  }
  cache::Store store{dir.path() / "cache"};
  const std::string key = sha256_hex("a build");
  const fs::path into = dir.path() / "into";
};

}  // namespace

TEST(SharedCache, EntriesVerifyAndADamagedOneIsAMiss) {
  Fixture f;
  f.shared->put("objects/ab/x.o", "object bytes");
  EXPECT_EQ(f.remote->entries["objects/ab/x.o"], cache::frame_entry("object bytes"));
  EXPECT_EQ(f.shared->get("objects/ab/x.o", cache::kMaxRemoteObject), "object bytes");
  EXPECT_EQ(f.shared->get("objects/ab/y.o", cache::kMaxRemoteObject), std::nullopt);
  f.remote->entries["objects/ab/x.o"].back() ^= 1;
  EXPECT_EQ(f.shared->get("objects/ab/x.o", cache::kMaxRemoteObject), std::nullopt);
  f.remote->entries["objects/ab/z.o"] = "kiln-object 1 short";
  EXPECT_EQ(f.shared->get("objects/ab/z.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_EQ(f.shared->stats().hits, 1u);
  EXPECT_EQ(f.shared->stats().misses, 3u);
  EXPECT_EQ(f.shared->stats().corrupt, 2u);
  EXPECT_TRUE(f.shared->on());
}

TEST(SharedCache, TheFirstErrorTurnsItOffForTheRun) {
  Fixture f;
  f.remote->down = true;
  EXPECT_EQ(f.shared->get("objects/ab/x.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_FALSE(f.shared->on());
  EXPECT_TRUE(f.shared->stats().failed);
  f.remote->down = false;
  f.shared->put("objects/ab/x.o", "bytes");
  EXPECT_EQ(f.shared->get("objects/ab/x.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_EQ(f.remote->calls, 1);                        // never asked again
  EXPECT_TRUE(f.shared->take_lease("objects/ab/x.o"));  // off: nobody to wait for
}

TEST(SharedCache, ReadOnlyNeverWrites) {
  auto owned = std::make_unique<MemoryRemote>();
  MemoryRemote* remote = owned.get();
  remote->entries["objects/ab/x.o"] = cache::frame_entry("theirs");
  cache::SharedCache shared(std::move(owned), true);
  shared.put("objects/ab/y.o", "mine");
  EXPECT_EQ(remote->entries.size(), 1u);
  EXPECT_EQ(shared.get("objects/ab/x.o", cache::kMaxRemoteObject), "theirs");
}

TEST(SharedCache, TheLocalStoreTakesMissesFromItAndStoresIntoIt) {
  Fixture f;
  cache::Store store(f.dir.path() / "cache");
  store.set_shared(f.shared);
  const std::string key = sha256_hex("a job");
  f.remote->entries[cache::remote_object_name(key, ".o")] = cache::frame_entry("remote object");
  EXPECT_EQ(store.load_object(key, ".o"), "remote object");
  f.remote->entries.clear();
  EXPECT_EQ(store.load_object(key, ".o"), "remote object");  // kept locally
  EXPECT_EQ(store.local_stats().hits, 1u);
  EXPECT_EQ(store.local_stats().misses, 1u);
  store.store_object(sha256_hex("another"), ".dev", "part").value();
  EXPECT_EQ(f.remote->entries.at(cache::remote_object_name(sha256_hex("another"), ".dev")),
            cache::frame_entry("part"));
}

// A worker whose own manifest has no matching set takes the one another worker recorded in the
// remote, and recording keeps the remote's sets (the fleet's) along with its own.
TEST(SharedCache, ManifestsOfOtherWorkersAreConsultedAndKept) {
  Fixture f;
  const fs::path header = f.dir.path() / "a.h", depfile = f.dir.path() / "x.d";
  write_file_atomic(depfile, "x.o: a.h\n").value();
  const std::string command = sha256_hex("g++ -c x.cu");
  cache::Store a(f.dir.path() / "a"), b(f.dir.path() / "b");
  a.set_shared(f.shared);
  compile::StoreObjectCache objects_a(a), objects_b(b);
  write_file_atomic(header, "v1").value();
  const std::string v1 =
      compile::ContentKeys(objects_a, f.dir.path()).record(command, {depfile}).value().key;
  write_file_atomic(header, "v2").value();  // b, alone, records another set
  compile::ContentKeys(objects_b, f.dir.path()).record(command, {depfile}).value();
  b.set_shared(f.shared);
  write_file_atomic(header, "v1").value();
  {
    compile::ContentKeys keys(objects_b, f.dir.path());
    auto hit = keys.lookup(command, "x.cu");
    ASSERT_TRUE(hit);
    EXPECT_EQ(hit->key, v1);
  }
  write_file_atomic(header, "v3").value();
  compile::ContentKeys keys(objects_b, f.dir.path());
  EXPECT_FALSE(keys.lookup(command, "x.cu"));
  keys.record(command, {depfile}).value();
  auto manifest =
      f.shared->get(cache::remote_object_name(command, ".deps"), cache::kMaxRemoteManifest);
  ASSERT_TRUE(manifest);
  EXPECT_EQ(compile::parse_manifest(*manifest)->size(), 3u);  // v3, b's v2, a's v1
}

TEST(SharedCache, ARemoteWheelMustBeAPlainNameWithItsRecordedSha256) {
  WheelOffers f;
  auto offer = [&](const std::string& name, const std::string& sha) {
    f.shared->put(cache::remote_wheel_name(f.key, name), "wheel bytes");
    return f.offer({{"wheel", name}, {"sha256", sha}});
  };
  EXPECT_FALSE(offer("../../x.whl", sha256_hex("wheel bytes")));
  EXPECT_FALSE(offer(".x.whl", sha256_hex("wheel bytes")));
  EXPECT_FALSE(offer("x.whl", sha256_hex("other bytes")));
  auto got = offer("x-1.0-py3-none-any.whl", sha256_hex("wheel bytes"));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->wheel, f.into / "x-1.0-py3-none-any.whl");
  EXPECT_EQ(read_file(got->wheel).value(), "wheel bytes");
  EXPECT_EQ(std::distance(fs::directory_iterator(f.into), fs::directory_iterator()), 1);
}

TEST(SharedCache, ARemoteEntryOfWrongTypesIsACorruptMissNeverAnError) {
  WheelOffers f;
  const std::string name = "x-1.0-py3-none-any.whl";
  f.shared->put(cache::remote_wheel_name(f.key, name), "wheel bytes");
  const nlohmann::json good = {{"wheel", name}, {"sha256", sha256_hex("wheel bytes")}};
  // Before: json type_error.302, a failed build.
  EXPECT_FALSE(f.offer({{"wheel", 123}, {"sha256", 456}}));
  nlohmann::json version = good;
  version["version"] = 5;
  EXPECT_FALSE(f.offer(version));
  nlohmann::json archs = good;
  archs["archs"] = std::vector<std::string>(700000, "sm_90");
  EXPECT_FALSE(f.offer(archs));
  nlohmann::json other = good;
  other["key"] = sha256_hex("another build");
  EXPECT_FALSE(f.offer(other));
  auto got = f.offer(good);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->sha256, sha256_hex("wheel bytes"));
}

class RemoteConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : {"KILN_REMOTE_CACHE", "KILN_REMOTE_CACHE_TOKEN",
                             "KILN_REMOTE_CACHE_TOKEN_FILE", "KILN_REMOTE_CACHE_READONLY"})
      ::unsetenv(name);
    fs::create_directories(cache());
  }
  void TearDown() override {
    ::unsetenv("KILN_REMOTE_CACHE");
    ::unsetenv("KILN_REMOTE_CACHE_TOKEN");
  }
  fs::path cache() const { return dir_.path() / "cache"; }
  TempDir dir_ = TempDir::create(fs::temp_directory_path(), "kiln-remote-config-").value();
};

TEST_F(RemoteConfigTest, FlagThenEnvironmentThenKilnToml) {
  EXPECT_EQ(remote::load_config(std::nullopt, false, cache()).value().url, "");
  write_file_atomic(dir_.path() / "kiln.toml",
                    "[remote-cache]\nurl = \"redis://file:6379\"\ntoken-file = \"token\"\n"
                    "readonly = true\nlease-ttl = 60\n")
      .value();
  write_file_atomic(dir_.path() / "token", "t0ken\nignored\n").value();
  remote::Config c = remote::load_config(std::nullopt, false, cache()).value();
  EXPECT_EQ(c.url, "redis://file:6379");
  EXPECT_EQ(c.token, "t0ken");
  EXPECT_TRUE(c.readonly);
  EXPECT_EQ(c.lease_ttl.count(), 60);
  ::setenv("KILN_REMOTE_CACHE", "http://env/cache/", 1);
  ::setenv("KILN_REMOTE_CACHE_TOKEN", "from-env", 1);
  c = remote::load_config(std::nullopt, false, cache()).value();
  EXPECT_EQ(c.url, "http://env/cache/");
  EXPECT_EQ(c.token, "from-env");
  EXPECT_EQ(remote::load_config("redis://flag", false, cache()).value().url, "redis://flag");
}

TEST_F(RemoteConfigTest, CredentialsInTheUrlAndBadSettingsAreRefused) {
  auto withheld = remote::load_config("https://user:pw@cache.example/", false, cache());
  ASSERT_FALSE(withheld);
  EXPECT_EQ(withheld.error().kind, ErrorKind::BadInput);
  EXPECT_EQ(withheld.error().message.find("pw"), std::string::npos);
  write_file_atomic(dir_.path() / "kiln.toml", "[remote-cache]\nurl = \"redis://x\"\nttl = 5\n")
      .value();
  auto unknown = remote::load_config(std::nullopt, false, cache());
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("kiln.toml:3:"), std::string::npos)
      << unknown.error().message;
  write_file_atomic(dir_.path() / "kiln.toml", "[remote-cache]\nlease-ttl = 1\n").value();
  EXPECT_FALSE(remote::load_config(std::nullopt, false, cache()));
  EXPECT_FALSE(remote::open_remote({"ftp://x/", "", false, {}}));
  EXPECT_FALSE(remote::open_remote({"redis://x:99999", "", false, {}}));
  EXPECT_FALSE(remote::open_remote({"redis://x/abc", "", false, {}}));
}

}  // namespace kiln
