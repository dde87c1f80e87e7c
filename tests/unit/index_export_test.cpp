// index/export: the static index tree: layout, hard links or copies, atomic replacement of an
// earlier export, refusal to replace anything else.
#include "index/export.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "index/scan.h"
#include "index_testutil.h"

namespace kiln::index {

namespace {

ino_t inode(const fs::path& p) {
  struct stat st {};
  ::stat(p.c_str(), &st);
  return st.st_ino;
}

std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST(IndexExport, WritesTheServedPagesMetadataAndWheels) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-export-").value();
  fs::path cache = dir.path() / "cache";
  fs::path e1 = testutil::add_entry(cache, "k1", "default", "demo-1.0+cu130-py3-none-any.whl", 10);
  testutil::add_entry(cache, "k2", "sm90", "demo-1.0+cu130-py3-none-any.whl", 10, "other = 1\n");
  CacheIndex live(cache);
  auto model = live.current();
  fs::path out = dir.path() / "site" / "index";
  ExportResult r = export_index(*model, out).value();
  EXPECT_EQ(r.targets, 2u);
  EXPECT_EQ(r.projects, 2u);
  EXPECT_EQ(r.files, 2u);
  EXPECT_EQ(r.linked, 2u);  // same filesystem: hard links
  EXPECT_EQ(names(out), (std::vector<std::string>{".kiln-index", "default", "index.html", "sm90"}));
  EXPECT_EQ(read_file(out / "index.html").value(), model->root_html);
  const Target& t = *model->target("default");
  EXPECT_EQ(read_file(out / "default/simple/index.html").value(), t.page.html);
  EXPECT_EQ(read_file(out / "default/simple/index.json").value(), t.page.json);
  fs::path pdir = out / "default/simple/demo";
  EXPECT_EQ(names(pdir), (std::vector<std::string>{"demo-1.0+cu130-py3-none-any.whl",
                                                   "demo-1.0+cu130-py3-none-any.whl.metadata",
                                                   "index.html", "index.json"}));
  EXPECT_EQ(read_file(pdir / "index.json").value(), t.projects.at("demo").page.json);
  EXPECT_EQ(inode(pdir / "demo-1.0+cu130-py3-none-any.whl"),
            inode(e1 / "demo-1.0+cu130-py3-none-any.whl"));
  std::string md = read_file(pdir / "demo-1.0+cu130-py3-none-any.whl.metadata").value();
  EXPECT_EQ(sha256_hex(md), t.projects.at("demo").files[0].metadata_sha256);
  // Each target has its own build.
  EXPECT_NE(sha256_file(out / "sm90/simple/demo/demo-1.0+cu130-py3-none-any.whl").value(),
            sha256_file(pdir / "demo-1.0+cu130-py3-none-any.whl").value());
  // Nothing left beside it.
  EXPECT_EQ(names(dir.path() / "site"), std::vector<std::string>{"index"});

  // --copy: the same bytes in a file of its own.
  fs::path copied = dir.path() / "copied";
  ExportOptions opts;
  opts.copy = true;
  ExportResult c = export_index(*model, copied, opts).value();
  EXPECT_EQ(c.copied, 2u);
  fs::path cw = copied / "default/simple/demo/demo-1.0+cu130-py3-none-any.whl";
  EXPECT_NE(inode(cw), inode(e1 / "demo-1.0+cu130-py3-none-any.whl"));
  EXPECT_EQ(read_file(cw).value(), read_file(e1 / "demo-1.0+cu130-py3-none-any.whl").value());
}

TEST(IndexExport, ReplacesAnEarlierExportAndNothingElse) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-export-").value();
  fs::path cache = dir.path() / "cache";
  testutil::add_entry(cache, "k1", "default", "demo-1.0-py3-none-any.whl", 10);
  testutil::add_entry(cache, "k2", "old", "demo-1.0-py3-none-any.whl", 10);
  CacheIndex live(cache);
  fs::path out = dir.path() / "out";
  export_index(*live.current(), out).value();
  EXPECT_TRUE(fs::exists(out / "old"));
  // The target "old" goes from the cache; the next export drops it in one swap.
  fs::create_directories(cache / "tmp");
  fs::rename(cache / "wheels" / "k2", cache / "tmp" / "gone");
  export_index(*live.current(), out).value();
  EXPECT_FALSE(fs::exists(out / "old"));
  EXPECT_TRUE(fs::exists(out / "default/simple/demo/demo-1.0-py3-none-any.whl"));
  EXPECT_EQ(names(dir.path()), (std::vector<std::string>{"cache", "out"}));

  // A directory with other content, or a file, is not replaced.
  fs::path precious = dir.path() / "precious";
  fs::create_directories(precious);
  std::ofstream(precious / "keep.txt") << "keep";
  auto refused = export_index(*live.current(), precious);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::BadInput);
  EXPECT_NE(refused.error().message.find("is not a kiln index export"), std::string::npos);
  EXPECT_EQ(names(precious), std::vector<std::string>{"keep.txt"});
  std::ofstream(dir.path() / "file") << "x";
  EXPECT_FALSE(export_index(*live.current(), dir.path() / "file"));
  // An empty directory is fine.
  fs::create_directories(dir.path() / "empty");
  EXPECT_TRUE(export_index(*live.current(), dir.path() / "empty"));
  EXPECT_TRUE(fs::exists(dir.path() / "empty" / "index.html"));
  EXPECT_EQ(names(dir.path()),
            (std::vector<std::string>{"cache", "empty", "file", "out", "precious"}));
}

}  // namespace kiln::index

namespace kiln::index {

TEST(IndexExport, KilnsOwnNamesGetEmptyPagesWhereATargetHasNoFiles) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-export-").value();
  fs::path cache = dir.path() / "cache";
  testutil::add_entry(cache, "k1", "default", "demo-1.0+cu130-py3-none-any.whl", 10);
  testutil::add_entry(cache, "k2", "sm90", "other-1.0-py3-none-any.whl", 10);
  CacheIndex live(cache);
  fs::path out = dir.path() / "index";
  ExportOptions opts;
  opts.own = {"kiln", "fla-core"};
  ExportResult r = export_index(*live.current(), out, opts).value();
  // Each target: the given names plus the other target's project, as `kiln serve` answers.
  EXPECT_EQ(r.empty, 6u);
  EXPECT_EQ(
      names(out / "default/simple"),
      (std::vector<std::string>{"demo", "fla-core", "index.html", "index.json", "kiln", "other"}));
  EXPECT_EQ(read_file(out / "sm90/simple/demo/index.json").value(),
            empty_project("demo").page.json);
  EXPECT_EQ(names(out / "sm90/simple/kiln"),
            (std::vector<std::string>{"index.html", "index.json"}));
  EXPECT_EQ(
      nlohmann::json::parse(read_file(out / "default/simple/fla-core/index.json").value())["files"],
      nlohmann::json::array());
}

}  // namespace kiln::index
