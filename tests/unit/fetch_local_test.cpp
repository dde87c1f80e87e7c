// Local and URL sources, and the factory that picks a backend.
#include <gtest/gtest.h>

#include "../support/fake_http.h"
#include "../support/fetch_util.h"
#include "cache/store.h"
#include "core/hash.h"
#include "fetch/source.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::fetch {

using kiln::testing::FakeHttp;
using kiln::testing::tree_listing;
using kiln::testing::write_text;

class LocalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    cache_ = dir_->path() / "cache";
    store_ = cache::Store(cache_);
  }
  std::optional<TempDir> dir_;
  fs::path cache_;
  cache::Store store_{fs::path()};  // the cache at cache_
  FakeHttp http_;
};

TEST_F(LocalTest, DirectoryIsUsedAsIs) {
  write_text(dir_->path() / "src" / "setup.py", "print(1)\n");
  Downloader d(http_, store_, true);
  Context ctx{d, ""};
  manifest::Source s;
  s.kind = manifest::Source::Kind::Local;
  s.path = dir_->path() / "src";
  auto got = make_source(s, ctx)->fetch(dir_->path() / "unused").value();
  EXPECT_TRUE(got.is_directory);
  EXPECT_FALSE(got.downloaded);
  EXPECT_EQ(got.path, dir_->path() / "src");
  EXPECT_EQ(got.sha256, tree_sha256(dir_->path() / "src").value());
  EXPECT_FALSE(fs::exists(cache_));
}

TEST_F(LocalTest, ArchiveIsVerifiedIntoTheCache) {
  write_text(dir_->path() / "pkg-1.0.tar.gz", "archive bytes");
  Downloader d(http_, store_, true);
  Context ctx{d, ""};
  manifest::Source s;
  s.kind = manifest::Source::Kind::Local;
  s.path = dir_->path() / "pkg-1.0.tar.gz";
  s.sha256 = sha256_hex("archive bytes");
  auto got = make_source(s, ctx)->fetch({}).value();
  EXPECT_FALSE(got.is_directory);
  EXPECT_EQ(got.path, layout(store_).download_path(s.sha256, "pkg-1.0.tar.gz"));
  EXPECT_EQ(read_file(got.path).value(), "archive bytes");

  s.sha256 = sha256_hex("pinned bytes");
  auto bad = make_source(s, ctx)->fetch({});
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "sha256 mismatch for " + s.path.string() +
                                     ": its content does not match the pinned " + s.sha256);
  EXPECT_EQ(bad.error().message.find(sha256_hex("archive bytes")), std::string::npos);
  EXPECT_EQ(tree_listing(cache_ / "downloads").size(), 3u);  // only the good one
  EXPECT_TRUE(http_.requests.empty());
}

TEST_F(LocalTest, UrlSourceKeepsTheUrlsFileName) {
  Downloader d(http_, store_, false);
  d.set_sleep([](std::chrono::milliseconds) {});
  Context ctx{d, ""};
  manifest::Source s;
  s.kind = manifest::Source::Kind::Url;
  s.url = "https://github.example/o/r/archive/v1.2%2Bx.tar.gz#frag";
  s.sha256 = sha256_hex("tarball");
  http_.add("https://github.example/o/r/archive/v1.2%2Bx.tar.gz", {200, "tarball"});
  auto got = make_source(s, ctx)->fetch({}).value();
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(got.path.filename(), "v1.2+x.tar.gz");
  EXPECT_EQ(read_file(got.path).value(), "tarball");

  // No usable name in the URL: "download".
  s.url = "https://files.example/get/";
  s.sha256 = sha256_hex("blob");
  http_.add(s.url, {200, "blob"});
  EXPECT_EQ(make_source(s, ctx)->fetch({}).value().path.filename(), "download");

  // file:// URLs are local copies: no network, fine offline.
  write_text(dir_->path() / "local.zip", "zip");
  Downloader offline(http_, store_, true);
  Context offline_ctx{offline, ""};
  s.url = "file://" + (dir_->path() / "local.zip").string();
  s.sha256 = sha256_hex("zip");
  auto local = make_source(s, offline_ctx)->fetch({}).value();
  EXPECT_FALSE(local.downloaded);
  EXPECT_EQ(local.path.filename(), "local.zip");
}

}  // namespace kiln::fetch
