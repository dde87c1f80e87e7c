// index/model and index/scan: wheel names, the per-target model (dedupe, pages), METADATA from
// real wheels, and the cache scan (incomplete, hostile and symlinked entries; rescans).
#include "index/model.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "cache/store.h"
#include "index/scan.h"
#include "index_testutil.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::index {

namespace {

using testutil::add_entry;
using testutil::metadata_text;
using testutil::write_wheel;

WheelEntry entry(std::string target, std::string key, std::string filename, std::int64_t at,
                 std::string metadata = "") {
  WheelEntry e;
  e.target = std::move(target);
  e.key = std::move(key);
  e.filename = std::move(filename);
  e.sha256 = sha256_hex(e.key);
  e.size = 100;
  e.committed_at = at;
  e.dir = "/nonexistent/" + e.key;
  // By default the METADATA the file name implies (the index checks one against the other).
  auto name = index_wheel_name(e.filename);
  e.metadata = !metadata.empty() ? metadata
               : name            ? metadata_text(name->distribution, name->version)
                                 : metadata_text("x", "1");
  return e;
}

void set_old_mtime(const fs::path& dir) {
  struct timespec times[2] = {{1000000000, 0}, {1000000000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, dir.c_str(), times, 0), 0);
}

}  // namespace

TEST(IndexWheelName, ParsesTheFiveAndSixPartForms) {
  auto w =
      index_wheel_name("causal_conv1d-1.7.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl")
          .value();
  EXPECT_EQ(w.distribution, "causal_conv1d");
  EXPECT_EQ(w.project, "causal-conv1d");
  EXPECT_EQ(w.version, "1.7.0+cu130torch2.11");
  EXPECT_EQ(w.build, "");
  EXPECT_EQ(w.tag_text(), "cp311-cp311-manylinux_2_34_x86_64");
  auto b = index_wheel_name("Foo.Bar-2.0-1local-py3-none-any.whl").value();
  EXPECT_EQ(b.project, "foo-bar");
  EXPECT_EQ(b.build, "1local");
  EXPECT_EQ(b.tag_text(), "py3-none-any");
  for (const char* bad :
       {"x-1.0-py3-none-any.zip", "x-1.0-py3-none.whl", "../x-1.0-py3-none-any.whl",
        "x-1.0-py3-none-any/..whl", "x-1.0-a-b-c-d-e.whl", "x-1.0-x1-py3-none-any.whl",
        "-1.0-py3-none-any.whl", "x-1 0-py3-none-any.whl", ".whl",
        // Served by the index's own parser before it read names as packaging does.
        "x-1.0.x-py3-none-any.whl", "x-1.0-3py-none-any.whl", "x__y-1.0-py3-none-any.whl",
        "x-1.0-py3..py2-none-any.whl",
        // packaging reads these; the index does not serve them (its own rules on top).
        "_x-1.0-py3-none-any.whl", "x- 1.0-py3-none-any.whl", "\xc3\xa4-1.0-py3-none-any.whl"}) {
    auto r = index_wheel_name(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    }
  }
}

TEST(IndexModel, OneWheelPerProjectVersionAndTagsNewestWins) {
  std::vector<WheelEntry> entries = {
      entry("t1", "k1", "fla_core-0.6.0-py3-none-any.whl", 100),
      entry("t1", "k2", "fla_core-0.6.0-py3-none-any.whl", 200),             // newer: wins
      entry("t1", "k0", "Fla.Core-0.6.0-py3-none-any.whl", 150),             // same project, older
      entry("t1", "k3", "fla_core-0.6.0-cp311-cp311-linux_x86_64.whl", 50),  // other tags: kept
      entry("t2", "k4", "fla_core-0.6.0-py3-none-any.whl", 10),              // other target: kept
      entry("t1", "kb", "demo-1.0-py3-none-any.whl", 300),
      entry("t1", "ka", "demo-1.0-py3-none-any.whl", 300),  // tie: the greater key (kb) wins
      entry("bad/target", "k5", "demo-1.0-py3-none-any.whl", 1),
      entry("t1", "k6", "not-a-wheel.tar.gz", 1),
  };
  entries.back().sha256 = "nothex";
  IndexModel m = build_model(entries);
  ASSERT_EQ(m.targets.size(), 2u);
  const Project& p = m.target("t1")->projects.at("fla-core");
  ASSERT_EQ(p.files.size(), 2u);
  EXPECT_EQ(p.files[0].filename, "fla_core-0.6.0-cp311-cp311-linux_x86_64.whl");
  EXPECT_EQ(p.files[1].key, "k2");
  EXPECT_EQ(m.target("t1")->projects.at("demo").files.at(0).key, "kb");
  EXPECT_EQ(m.target("t2")->projects.at("fla-core").files.at(0).key, "k4");
  EXPECT_EQ(m.target("bad/target"), nullptr);
  ASSERT_EQ(m.skipped.size(), 2u);
  EXPECT_NE(m.skipped[0].find("invalid target name 'bad/target'"), std::string::npos);
  EXPECT_NE(m.skipped[1].find("k6"), std::string::npos);
  EXPECT_NE(m.root_html.find("<a href=\"t1/simple/\">t1</a>"), std::string::npos);
}

TEST(IndexModel, TheLastBuildOfAFileNameWinsOverANewerCommit) {
  std::vector<WheelEntry> entries = {
      entry("t1", "k1", "demo-1.0-py3-none-any.whl", 100),
      entry("t1", "k2", "demo-1.0-py3-none-any.whl", 200),  // newer, but not the last build
      entry("t2", "k3", "demo-1.0-py3-none-any.whl", 100),
      entry("t2", "k4", "demo-1.0-py3-none-any.whl", 200),  // no last build: the newest wins
  };
  entries[0].last = true;
  IndexModel m = build_model(entries);
  EXPECT_EQ(m.target("t1")->projects.at("demo").files.at(0).key, "k1");
  EXPECT_EQ(m.target("t2")->projects.at("demo").files.at(0).key, "k4");
}

TEST(IndexModel, PagesCarryHashesMetadataAndPep700Fields) {
  std::string md = metadata_text("causal-conv1d", "1.10.0+cu130torch2.11", ">=3.9,<4");
  std::vector<WheelEntry> entries = {
      entry("default", "k1",
            "causal_conv1d-1.10.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl", 1796014860,
            md),
      entry("default", "k2", "causal_conv1d-1.9.0-cp311-cp311-manylinux_2_34_x86_64.whl", 1, ""),
  };
  IndexModel m = build_model(entries);
  const Project& p = m.target("default")->projects.at("causal-conv1d");
  EXPECT_EQ(p.versions,
            (std::vector<std::string>{"1.9.0", "1.10.0+cu130torch2.11"}));  // PEP 440 order
  auto json = nlohmann::json::parse(p.page.json);
  EXPECT_EQ(json["meta"]["api-version"], "1.1");
  EXPECT_EQ(json["name"], "causal-conv1d");
  const auto& f = json["files"][0];
  EXPECT_EQ(f["filename"],
            "causal_conv1d-1.10.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl");
  EXPECT_EQ(f["url"],
            "causal_conv1d-1.10.0%2Bcu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl");
  EXPECT_EQ(f["hashes"]["sha256"], sha256_hex("k1"));
  EXPECT_EQ(f["core-metadata"]["sha256"], sha256_hex(md));
  EXPECT_EQ(f["dist-info-metadata"]["sha256"], sha256_hex(md));
  EXPECT_EQ(f["requires-python"], ">=3.9,<4");
  EXPECT_EQ(f["size"], 100);
  EXPECT_EQ(f["upload-time"], "2026-11-30T05:01:00Z");
  const std::string& html = p.page.html;
  EXPECT_NE(html.find(cat("href=\"causal_conv1d-1.10.0%2Bcu130torch2.11-cp311-cp311-manylinux_2_34_"
                          "x86_64.whl#sha256=",
                          sha256_hex("k1"), "\"")),
            std::string::npos);
  EXPECT_NE(html.find("data-requires-python=\"&gt;=3.9,&lt;4\""), std::string::npos);
  EXPECT_NE(html.find(cat("data-core-metadata=\"sha256=", sha256_hex(md), "\"")),
            std::string::npos);
  EXPECT_NE(html.find(cat("data-dist-info-metadata=\"sha256=", sha256_hex(md), "\"")),
            std::string::npos);
  auto list = nlohmann::json::parse(m.target("default")->page.json);
  EXPECT_EQ(list["projects"], nlohmann::json::parse(R"([{"name":"causal-conv1d"}])"));
  EXPECT_NE(m.target("default")->page.html.find("<a href=\"causal-conv1d/\">causal-conv1d</a>"),
            std::string::npos);
  EXPECT_NE(p.page.html_etag, p.page.json_etag);
}

TEST(IndexMetadata, ReadsTheDistInfoMetadataOfARealWheel) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  std::string md = metadata_text("demo", "1.0+cu130");
  fs::path wheel = write_wheel(dir.path(), "demo-1.0+cu130-py3-none-any.whl", md);
  EXPECT_EQ(read_wheel_metadata(wheel, wheel.filename().string()).value(), md);
  // Capped size.
  auto big = read_wheel_metadata(wheel, wheel.filename().string(), 10);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message.find("METADATA inflates past the limit of 10 bytes"),
            std::string::npos);
  // Past the limit of a wheel's text files (docs/manifest.md, "Limits"), refused by its size.
  fs::path bomb = write_wheel(dir.path() / "bomb", "demo-1.0+cu130-py3-none-any.whl",
                              md + std::string(17u << 20, ' '));
  auto refused = read_wheel_metadata(bomb, bomb.filename().string());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find(
                "METADATA inflates past 16 MiB (the limit for a wheel's text files)"),
            std::string::npos)
      << refused.error().message;
  // Not a zip.
  fs::path junk = dir.path() / "junk-1.0-py3-none-any.whl";
  std::ofstream(junk) << "not a zip at all";
  EXPECT_FALSE(read_wheel_metadata(junk, junk.filename().string()));
  // No METADATA member.
  fs::path bare = dir.path() / "bare-1.0-py3-none-any.whl";
  {
    auto zip = archive::ZipWriter::create(bare).value();
    zip.add("bare/__init__.py", "").value();
    zip.finish().value();
  }
  auto none = read_wheel_metadata(bare, bare.filename().string());
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("no bare-1.0.dist-info/METADATA"), std::string::npos);
}

TEST(IndexScan, ServesOnlyCompleteEntriesInsideTheCache) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  fs::path cache = dir.path() / "cache";
  add_entry(cache, "good", "default", "demo-1.0-py3-none-any.whl", 10);
  // Incomplete: no entry.json (a crashed writer would never leave this, but a reader must not
  // care).
  write_wheel(cache / "wheels" / "incomplete", "demo-2.0-py3-none-any.whl",
              metadata_text("demo", "2.0"));
  // entry.json pointing outside the entry.
  fs::path evil = add_entry(cache, "evil", "default", "evil-1.0-py3-none-any.whl", 10);
  std::ofstream(dir.path() / "secret-1.0-py3-none-any.whl") << "secret";
  auto info = nlohmann::json::parse(read_file(evil / "entry.json").value());
  info["wheel"] = "../../../secret-1.0-py3-none-any.whl";
  std::ofstream(evil / "entry.json") << info.dump();
  // The wheel is a symlink to a wheel elsewhere.
  fs::path linked = add_entry(cache, "linked", "default", "linked-1.0-py3-none-any.whl", 10);
  fs::path outside = write_wheel(dir.path() / "outside", "linked-1.0-py3-none-any.whl",
                                 metadata_text("linked", "1.0"));
  fs::remove(linked / "linked-1.0-py3-none-any.whl");
  fs::create_symlink(outside, linked / "linked-1.0-py3-none-any.whl");
  // The entry directory is a symlink.
  fs::path real = add_entry(dir.path() / "other", "k", "default", "other-1.0-py3-none-any.whl", 10);
  fs::create_directory_symlink(real, cache / "wheels" / "symlinked");
  // Size differs from the record (a wheel being rewritten in place, or damage).
  fs::path resized = add_entry(cache, "resized", "default", "resized-1.0-py3-none-any.whl", 10);
  std::ofstream(resized / "resized-1.0-py3-none-any.whl", std::ios::app) << "more";

  ScanMemo cache_md;
  ScanResult scan = scan_cache(cache, cache_md);
  ASSERT_EQ(scan.entries.size(), 1u);
  EXPECT_EQ(scan.entries[0].key, "good");
  EXPECT_EQ(scan.entries[0].metadata, metadata_text("demo", "1.0"));
  std::string all = join(scan.skipped, "\n");
  EXPECT_EQ(scan.skipped.size(), 4u) << all;
  EXPECT_NE(all.find("cache entry evil: entry.json names no plain .whl file"), std::string::npos)
      << all;
  EXPECT_NE(
      all.find("cache entry linked: linked-1.0-py3-none-any.whl is missing or not a regular file"),
      std::string::npos)
      << all;
  EXPECT_NE(all.find("cache entry symlinked: not a directory"), std::string::npos) << all;
  EXPECT_NE(all.find("cache entry resized: resized-1.0-py3-none-any.whl: size"), std::string::npos)
      << all;
  EXPECT_EQ(all.find("incomplete"), std::string::npos);
  EXPECT_EQ(cache_md.metadata.size(), 1u);  // METADATA kept by the wheel's sha256

  // open_wheel refuses symlinks and wrong sizes, and names that are not plain.
  EXPECT_FALSE(open_wheel(linked, "linked-1.0-py3-none-any.whl", fs::file_size(outside)));
  EXPECT_FALSE(open_wheel(cache / "wheels" / "symlinked", "other-1.0-py3-none-any.whl",
                          fs::file_size(real / "other-1.0-py3-none-any.whl")));
  EXPECT_FALSE(open_wheel(cache / "wheels" / "good", "../good/demo-1.0-py3-none-any.whl", 0));
  EXPECT_FALSE(open_wheel(cache / "wheels" / "good", "demo-1.0-py3-none-any.whl", 1));
  auto fd = open_wheel(cache / "wheels" / "good", "demo-1.0-py3-none-any.whl",
                       fs::file_size(cache / "wheels" / "good" / "demo-1.0-py3-none-any.whl"));
  ASSERT_TRUE(fd);
  ::close(*fd);
}

TEST(IndexScan, CacheIndexFollowsCommitsAndRemovals) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  fs::path cache = dir.path() / "cache";
  CacheIndex live(cache);
  auto empty = live.current();  // no wheels/ directory yet
  EXPECT_TRUE(empty->targets.empty());

  add_entry(cache, "k1", "default", "demo-1.0-py3-none-any.whl", 10);
  auto one = live.current();
  ASSERT_EQ(one->targets.size(), 1u);
  EXPECT_EQ(one->target("default")->projects.at("demo").files.size(), 1u);
  set_old_mtime(cache / "wheels");  // settled: no rescans until it changes
  auto again = live.current();
  EXPECT_EQ(live.current().get(), again.get());

  // A newer build of the same wheel replaces it; a second target appears.
  add_entry(cache, "k2", "default", "demo-1.0-py3-none-any.whl", 20, "x = 2\n");
  add_entry(cache, "k3", "other", "demo-1.0-py3-none-any.whl", 20);
  auto two = live.current();
  EXPECT_EQ(two->targets.size(), 2u);
  EXPECT_EQ(two->target("default")->projects.at("demo").files.at(0).key, "k2");

  // Removal is a rename out of wheels/ (cache::Store::remove): gone at the next request.
  fs::create_directories(cache / "tmp");
  fs::rename(cache / "wheels" / "k2", cache / "tmp" / "removed");
  EXPECT_EQ(live.current()->target("default")->projects.at("demo").files.at(0).key, "k1");
  EXPECT_TRUE(live.take_new_skipped().empty());
}

// `kiln cache gc --max-size/--max-age` may remove the entry a last/ record names (the one served):
// the record is then skipped without a word, and the file name's newest other entry is served.
TEST(IndexScan, ALastRecordWhoseEntryIsGoneIsSkipped) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  fs::path cache = dir.path() / "cache";
  const std::string old_key = sha256_hex("old"), new_key = sha256_hex("new");
  const std::string file = "demo-1.0-py3-none-any.whl";
  add_entry(cache, old_key, "default", file, 10);
  add_entry(cache, new_key, "default", file, 20, "x = 2\n");
  cache::Store store(cache);
  store.record_last({"default", "demo", old_key, file, "pure", nlohmann::json::object()}).value();
  // A record of a key that never had an entry, in another target.
  store.record_last({"other", "demo", sha256_hex("never"), file, "pure", nullptr}).value();
  CacheIndex live(cache);
  auto served = [&]() -> std::vector<std::string> {
    ScanMemo md;
    ScanResult scan = scan_cache(cache, md);
    EXPECT_TRUE(scan.skipped.empty()) << join(scan.skipped, "\n");
    IndexModel model = build_model(std::move(scan.entries));
    EXPECT_TRUE(model.skipped.empty()) << join(model.skipped, "\n");
    std::vector<std::string> keys;
    for (const auto& [tname, t] : model.targets)
      for (const auto& [pname, p] : t.projects)
        for (const auto& f : p.files) keys.push_back(cat(tname, ":", f.key));
    // The live index agrees.
    std::vector<std::string> live_keys;
    for (const auto& [tname, t] : live.current()->targets)
      for (const auto& [pname, p] : t.projects)
        for (const auto& f : p.files) live_keys.push_back(cat(tname, ":", f.key));
    EXPECT_EQ(keys, live_keys);
    return keys;
  };
  EXPECT_EQ(served(), std::vector<std::string>{"default:" + old_key});  // the last build wins
  store.remove(old_key).value();
  EXPECT_EQ(served(), std::vector<std::string>{"default:" + new_key});
  store.remove(new_key).value();
  EXPECT_TRUE(served().empty());
  EXPECT_EQ(store.last_builds().size(), 2u);  // the records stay; they name nothing served
}

// kiln's own wheel (scripts/package --cache) is on every target's index, the targets of the
// manifests directory without wheels of their own included; what is not a kiln-wheels wheel, or
// not a plain file, is left out.
TEST(IndexScan, KilnsOwnWheelIsOnEveryTarget) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  fs::path cache = dir.path() / "cache";
  CacheIndex live(cache);
  add_entry(cache, "k1", "default", "demo-1.0-py3-none-any.whl", 10);
  add_entry(cache, "k2", "gpu-host", "demo-1.0-py3-none-any.whl", 10);
  set_old_mtime(cache / "wheels");
  EXPECT_FALSE(live.current()->target("default")->projects.contains("kiln-wheels"));

  fs::path own = layout(cache::Store(cache)).kiln_wheels();
  const std::string name = "kiln_wheels-0.1.0+g0123456789ab-py3-none-manylinux_2_28_x86_64.whl";
  write_wheel(own, name, metadata_text("kiln-wheels", "0.1.0+g0123456789ab", ""));
  write_wheel(dir.path(), "other-1.0-py3-none-any.whl", metadata_text("other", "1.0"));
  fs::rename(dir.path() / "other-1.0-py3-none-any.whl", own / "other-1.0-py3-none-any.whl");
  fs::create_symlink(own / name, own / "kiln_wheels-0.2.0-py3-none-manylinux_2_28_x86_64.whl");

  auto model = live.current();  // the new folder is seen without a change to wheels/
  for (const char* t : {"default", "gpu-host"}) {
    const Project& p = model->target(t)->projects.at("kiln-wheels");
    ASSERT_EQ(p.files.size(), 1u) << t;
    EXPECT_EQ(p.files[0].filename, name);
    EXPECT_EQ(p.files[0].sha256, sha256_file(own / name).value());
    EXPECT_EQ(p.files[0].dir, own);
    EXPECT_NE(model->target(t)->page.html.find("kiln-wheels"), std::string::npos);
  }
  Target known = model->known_target("cuda12");
  EXPECT_EQ(known.name, "cuda12");
  ASSERT_TRUE(known.projects.contains("kiln-wheels"));
  EXPECT_NE(known.page.html.find("kiln-wheels"), std::string::npos);
  std::string skipped = join(live.take_new_skipped(), "\n");
  EXPECT_NE(skipped.find("other-1.0-py3-none-any.whl: not a kiln-wheels wheel"), std::string::npos)
      << skipped;
  EXPECT_NE(
      skipped.find("kiln_wheels-0.2.0-py3-none-manylinux_2_28_x86_64.whl: not a regular file"),
      std::string::npos)
      << skipped;
  // What the server hands out is the file itself, opened without following links.
  auto fd = open_wheel(own, name, fs::file_size(own / name));
  ASSERT_TRUE(fd);
  ::close(*fd);
}

}  // namespace kiln::index

namespace kiln::index {

// A served file must be what its METADATA says: a file name claiming 1!2.0 over METADATA of 0.1.0
// (or another project's name) is left out, and said so; the same rule for the cache's entries.
TEST(IndexModel, AFileIsServedOnlyAsWhatItsMetadataSays) {
  std::vector<WheelEntry> entries = {
      entry("default", "k1", "demo-1!2.0-py3-none-any.whl", 10, metadata_text("demo", "0.1.0")),
      entry("default", "k2", "demo-1.0-py3-none-any.whl", 10, metadata_text("other", "1.0")),
      entry("default", "k3", "demo-01.0-py3-none-any.whl", 10, metadata_text("Demo", "1.0")),
      entry("default", "k4", "demo-2.0-py3-none-any.whl", 10, metadata_text("demo", "not a v"))};
  IndexModel model = build_model(std::move(entries));
  const Project& p = model.target("default")->projects.at("demo");
  ASSERT_EQ(p.files.size(), 1u);  // PEP 440 compares 01.0 and 1.0 equal, and names normalised
  EXPECT_EQ(p.files[0].filename, "demo-01.0-py3-none-any.whl");
  std::string skipped = join(model.skipped, "\n");
  EXPECT_NE(skipped.find("demo-1!2.0-py3-none-any.whl: its METADATA says Version 0.1.0, not 1!2.0"),
            std::string::npos)
      << skipped;
  EXPECT_NE(skipped.find("demo-1.0-py3-none-any.whl: its METADATA names the project 'other'"),
            std::string::npos);
  EXPECT_NE(skipped.find("demo-2.0-py3-none-any.whl: its METADATA says Version not a v"),
            std::string::npos);
}

// <cache>/kiln-wheels/: a folder that is a link serves nothing (the server would not follow it);
// at most kMaxKilnWheels files, each at most kMaxKilnWheelBytes (a 4 GiB sparse file once took
// every rescan seconds); a file is hashed once per identity, again after it changed.
TEST(IndexScan, KilnWheelsAreBoundedAndHashedOncePerIdentity) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-index-").value();
  fs::path cache = dir.path() / "cache";
  fs::path own = layout(cache::Store(cache)).kiln_wheels();
  const std::string name = "kiln_wheels-0.1.0-py3-none-manylinux_2_28_x86_64.whl";
  write_wheel(own, name, metadata_text("kiln-wheels", "0.1.0", ""));
  ScanMemo memo;
  ScanResult first = scan_cache(cache, memo);
  ASSERT_EQ(first.entries.size(), 1u);
  ASSERT_EQ(memo.kiln_wheels.size(), 1u);
  EXPECT_EQ(memo.kiln_wheels.begin()->second, sha256_file(own / name).value());
  // The memo's hash is what the next scan takes for an unchanged file (not read again)...
  memo.kiln_wheels.begin()->second = std::string(64, 'f');
  EXPECT_EQ(scan_cache(cache, memo).entries.at(0).sha256, std::string(64, 'f'));
  // ... and a changed file is hashed anew.
  write_wheel(own, name, metadata_text("kiln-wheels", "0.1.0", ">=3.8"));
  EXPECT_EQ(scan_cache(cache, memo).entries.at(0).sha256, sha256_file(own / name).value());

  // Too large (sparse: no disk used): left out, and said so.
  const std::string big = "kiln_wheels-0.2.0-py3-none-manylinux_2_28_x86_64.whl";
  { std::ofstream(own / big) << "x"; }
  fs::resize_file(own / big, kMaxKilnWheelBytes + 1);
  ScanResult r = scan_cache(cache, memo);
  EXPECT_EQ(r.entries.size(), 1u);
  EXPECT_NE(join(r.skipped, "\n").find(cat(big, ": larger than 256 MiB")), std::string::npos)
      << join(r.skipped, "\n");
  fs::remove(own / big);
  // More files than the cap: the rest left out.
  for (std::size_t i = 0; i < kMaxKilnWheels + 3; ++i)
    std::ofstream(own / cat("x", i, ".whl")) << "x";
  r = scan_cache(cache, memo);
  EXPECT_EQ(std::count_if(r.skipped.begin(), r.skipped.end(),
                          [](const std::string& s) {
                            return s.find("more than 64 wheels in the folder") != s.npos;
                          }),
            4);

  // The folder itself a link: nothing served from it.
  fs::path cache2 = dir.path() / "cache2";
  fs::create_directories(cache2);
  fs::create_directory_symlink(own, layout(cache::Store(cache2)).kiln_wheels());
  ScanMemo memo2;
  r = scan_cache(cache2, memo2);
  EXPECT_TRUE(r.entries.empty());
  EXPECT_NE(join(r.skipped, "\n").find("kiln-wheels: not a directory (a link is not followed)"),
            std::string::npos);
}

}  // namespace kiln::index
