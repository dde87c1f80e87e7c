// Content keys: dependency files as gcc writes them, manifests (bounded, strict), the hashing of
// the files they name (regular files only), and lookups and records over the real object cache.
#include "compile/content_key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::compile {

namespace fs = std::filesystem;

TEST(Depfile, PrerequisitesOfEveryRuleEscapesUndone) {
  // gcc -MD -MP: continuations, an escaped space, $$, and phony rules for each header.
  const std::string text =
      "obj/x.o: /src/x.cu /inc/a\\ b.h \\\n  /inc/c$$.h \\\r\n /inc/d\\#.h\n\n/inc/a\\ b.h:\n\n"
      "/inc/c$$.h:\n";
  EXPECT_EQ(parse_depfile(text).value(),
            (std::vector<std::string>{"/inc/a b.h", "/inc/c$.h", "/inc/d#.h", "/src/x.cu"}));
  EXPECT_EQ(parse_depfile("x.o : a.h b.h a.h\n").value(), (std::vector<std::string>{"a.h", "b.h"}));
  EXPECT_FALSE(parse_depfile("made obj/x.o"));  // no rule
  EXPECT_FALSE(parse_depfile(""));
  EXPECT_FALSE(parse_depfile("x.o: " + std::string(5000, 'a')));
  EXPECT_FALSE(parse_depfile(std::string((16 << 20) + 1, ' ')));
}

TEST(Manifest, RoundTripsAndRefusesAnythingElse) {
  const std::string sha = sha256_hex("a");
  const std::vector<Deps> two = {{{"/a.h", sha}, {"/b.h", sha}}, {{"/a.h", sha}}};
  EXPECT_EQ(parse_manifest(render_manifest(two)).value(), two);
  EXPECT_FALSE(parse_manifest("{"));
  EXPECT_FALSE(parse_manifest(R"({"format":"kiln-deps 2","candidates":[]})"));
  EXPECT_FALSE(parse_manifest(R"({"format":"kiln-deps 1","candidates":[[["/a.h","xyz"]]]})"));
  EXPECT_FALSE(parse_manifest(cat(R"({"format":"kiln-deps 1","candidates":[[["/b.h",")", sha,
                                  R"("],["/a.h",")", sha, R"("]]]})")));  // unsorted
  EXPECT_FALSE(
      parse_manifest(cat(R"({"format":"kiln-deps 1","candidates":[[["",")", sha, R"("]]]})")));
  std::vector<Deps> many(kMaxCandidates + 1, Deps{{"/a.h", sha}});
  EXPECT_FALSE(parse_manifest(render_manifest(many)));
}

TEST(FileHasher, RegularFilesOnly) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-hasher-").value();
  write_file_atomic(dir.path() / "a.h", "int a;\n").value();
  ASSERT_EQ(::mkfifo((dir.path() / "fifo").c_str(), 0600), 0);
  FileHasher hasher(dir.path());
  EXPECT_EQ(hasher.sha256("a.h"), sha256_hex("int a;\n"));  // relative to the jobs' directory
  EXPECT_EQ(hasher.sha256((dir.path() / "a.h").string()), sha256_hex("int a;\n"));
  EXPECT_EQ(hasher.sha256((dir.path() / "fifo").string()), std::nullopt);  // does not hang
  EXPECT_EQ(hasher.sha256(dir.path().string()), std::nullopt);
  EXPECT_EQ(hasher.sha256("/nonexistent/x.h"), std::nullopt);
  EXPECT_EQ(hasher.sha256("/dev/zero"), std::nullopt);
}

class ContentKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-content-").value());
    store_ = std::make_unique<cache::Store>(dir_->path() / "cache");
    objects_ = std::make_unique<StoreObjectCache>(*store_);
    write_file_atomic(path("x.cu"), "#include \"a.h\"\n").value();
    write_file_atomic(path("a.h"), "int a;\n").value();
    write_file_atomic(path("x.d"), cat("x.o: ", path("x.cu").string(), " a.h\n")).value();
  }
  fs::path path(const std::string& name) const { return dir_->path() / name; }

  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<cache::Store> store_;
  std::unique_ptr<StoreObjectCache> objects_;
  const std::string command_ = sha256_hex("g++ -c x.cu");
};

TEST_F(ContentKeysTest, ARecordedSetMatchesUntilAFileItNamesChanges) {
  Keyed first;
  {
    ContentKeys keys(*objects_, dir_->path());
    EXPECT_FALSE(keys.lookup(command_, "x.cu"));
    first = keys.record(command_, {path("x.d")}).value();
    EXPECT_EQ(first.deps.size(), 2u);
    EXPECT_EQ(keys.lookup(command_, "x.cu")->key, first.key);
  }
  // A new build (files are hashed once per build): a changed header misses.
  write_file_atomic(path("a.h"), "int a = 1;\n").value();
  Keyed second;
  {
    ContentKeys keys(*objects_, dir_->path());
    EXPECT_FALSE(keys.lookup(command_, "x.cu"));
    second = keys.record(command_, {path("x.d")}).value();
    EXPECT_NE(second.key, first.key);
  }
  // Both sets recorded, newest first: the old header matches the first again.
  write_file_atomic(path("a.h"), "int a;\n").value();
  ContentKeys keys(*objects_, dir_->path());
  EXPECT_EQ(keys.lookup(command_, "x.cu")->key, first.key);
  EXPECT_EQ(parse_manifest(objects_->load_manifest(command_).value())->size(), 2u);
  // Another command key shares nothing.
  EXPECT_FALSE(keys.lookup(sha256_hex("g++ -O3 -c x.cu"), "x.cu"));
}

TEST_F(ContentKeysTest, DamagedOrHostileManifestsAreMisses) {
  // A damaged entry (its recorded sha256 no longer matches) and a well-formed manifest naming a
  // FIFO and a device: misses, and nothing blocks.
  ContentKeys keys(*objects_, dir_->path());
  keys.record(command_, {path("x.d")}).value();
  fs::path entry = layout(*store_).object_path(command_, ".deps");
  std::string bytes = read_file(entry).value();
  bytes.back() ^= 1;
  write_file_atomic(entry, bytes).value();
  EXPECT_FALSE(keys.lookup(command_, "x.cu"));
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  const std::string sha = sha256_hex("");
  objects_
      ->store_manifest(command_,
                       render_manifest({{{"/dev/zero", sha}}, {{path("fifo").string(), sha}}}))
      .value();
  EXPECT_FALSE(keys.lookup(command_, "x.cu"));
  // A dependency file that is not one: the record fails (the job is then not cached).
  write_file_atomic(path("bad.d"), "made x.o").value();
  EXPECT_FALSE(keys.record(command_, {path("bad.d")}));
}

}  // namespace kiln::compile
