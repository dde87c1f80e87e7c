// PyPI sources against index pages served by a real local HTTP server.
#include <gtest/gtest.h>

#include "../support/fetch_util.h"
#include "../support/http_server.h"
#include "cache/store.h"
#include "core/hash.h"
#include "fetch/source.h"

namespace kiln::fetch {

using kiln::testing::HttpServer;
using kiln::testing::ScopedEnv;
using kiln::testing::test_bytes;
using kiln::testing::tree_listing;
using kiln::testing::write_text;

class PypiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    cache_ = dir_->path() / "cache";
    store_ = cache::Store(cache_);
    fs::path www = dir_->path() / "www";
    write_text(www / "files" / "demo_pkg-1.0.tar.gz", sdist_);
    write_text(www / "files" / "demo_pkg-1.0-py3-none-any.whl", wheel_);
    // PEP 691 JSON, with relative URLs and fragments.
    write_text(
        www / "json" / "demo-pkg" / "index.json",
        cat(R"({"meta": {"api-version": "1.0"}, "name": "demo-pkg", "files": [)",
            R"({"filename": "demo_pkg-1.0-py3-none-any.whl", "url": "../../files/demo_pkg-1.0-py3-none-any.whl#sha256=)",
            sha256_hex(wheel_), R"(", "hashes": {"sha256": ")", sha256_hex(wheel_), R"("}},)",
            R"({"filename": "demo_pkg-1.0.tar.gz", "url": "/files/demo_pkg-1.0.tar.gz", "hashes": {"sha256": ")",
            sha256_hex(sdist_), R"("}}]})"));
    // PEP 503 HTML only.
    write_text(
        www / "html" / "demo-pkg" / "index.html",
        cat("<html><body><a href=\"../../files/demo_pkg-1.0.tar.gz#sha256=", sha256_hex(sdist_),
            "\">demo_pkg-1.0.tar.gz</a>\n<a href=\"../../files/demo_pkg-1.0-py3-none-any.whl\">"
            "demo_pkg-1.0-py3-none-any.whl</a></body></html>"));
    // An index whose hash for the sdist disagrees with the pin.
    write_text(www / "lying" / "demo-pkg" / "index.html",
               cat("<a href=\"../../files/demo_pkg-1.0.tar.gz#sha256=", sha256_hex("other"),
                   "\">demo_pkg-1.0.tar.gz</a>"));
    server_.emplace(www);
  }

  std::vector<std::string> paths() const {
    std::vector<std::string> out;
    for (const auto& r : server_->requests()) out.push_back(r["path"].get<std::string>());
    return out;
  }

  ScopedEnv no_proxy_{"no_proxy", "127.0.0.1,localhost"};
  std::optional<TempDir> dir_;
  fs::path cache_;
  cache::Store store_{fs::path()};  // the cache at cache_
  std::optional<HttpServer> server_;
  std::unique_ptr<HttpClient> http_ = make_curl_client();
  const std::string sdist_ = test_bytes(5000, 1);
  const std::string wheel_ = test_bytes(3000, 2);
};

TEST_F(PypiTest, FindsTheFileOnAJsonIndex) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/json/")};
  auto got = fetch_index_file(ctx, "Demo.Pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_)).value();
  EXPECT_FALSE(got.is_directory);
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(got.sha256, sha256_hex(sdist_));
  EXPECT_EQ(read_file(got.path).value(), sdist_);
  EXPECT_EQ(paths(), (std::vector<std::string>{"/json/demo-pkg/", "/files/demo_pkg-1.0.tar.gz"}));
  EXPECT_EQ(server_->requests()[0]["accept"].get<std::string>().rfind(
                "application/vnd.pypi.simple.v1+json", 0),
            0u);
  // A relative URL with a fragment, on the same page.
  auto wheel =
      fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0-py3-none-any.whl", sha256_hex(wheel_))
          .value();
  EXPECT_EQ(read_file(wheel.path).value(), wheel_);
  EXPECT_EQ(paths().back(), "/files/demo_pkg-1.0-py3-none-any.whl");
}

TEST_F(PypiTest, FallsBackToHtmlAndTheManifestSource) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/html")};  // no trailing slash: added
  manifest::Source pin;
  pin.kind = manifest::Source::Kind::Pypi;
  pin.pypi = "demo_pkg";
  pin.file = "demo_pkg-1.0.tar.gz";
  pin.sha256 = sha256_hex(sdist_);
  auto got = make_source(pin, ctx)->fetch(dir_->path() / "unused").value();
  EXPECT_EQ(read_file(got.path).value(), sdist_);
  EXPECT_EQ(paths(), (std::vector<std::string>{"/html/demo-pkg/", "/files/demo_pkg-1.0.tar.gz"}));
  EXPECT_FALSE(fs::exists(dir_->path() / "unused"));
}

TEST_F(PypiTest, CachedFileNeedsNoIndexAtAll) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/json/")};
  fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_)).value();
  server_->stop();
  auto again = fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_));
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_FALSE(again->downloaded);
  Downloader offline(*http_, store_, true);
  Context offline_ctx{offline, "https://unreachable.invalid/simple/"};
  EXPECT_EQ(fetch_index_file(offline_ctx, "demo-pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_))
                .value()
                .path,
            again->path);
}

TEST_F(PypiTest, OfflineMissingFileAsksNothing) {
  Downloader d(*http_, store_, true);
  Context ctx{d, server_->url("/json/")};
  auto got = fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_));
  ASSERT_FALSE(got);
  EXPECT_EQ(
      got.error().message,
      "demo_pkg-1.0.tar.gz (sha256 " + sha256_hex(sdist_) +
          ") is not in the download cache and --offline forbids downloading it; fetch it first "
          "where the network is reachable (`kiln fetch` with the same packages and "
          "--target, into this cache), then build --offline");
  EXPECT_TRUE(server_->requests().empty());
}

TEST_F(PypiTest, EmptyFileNamePicksTheFileBySha256) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/json/")};
  auto got = fetch_index_file(ctx, "demo-pkg", "", sha256_hex(wheel_)).value();
  EXPECT_EQ(got.path.filename(), "demo_pkg-1.0-py3-none-any.whl");
  auto none = fetch_index_file(ctx, "demo-pkg", "", sha256_hex("nothing"));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().message, "no file of project 'demo-pkg' on " + server_->url("/json/") +
                                      " has sha256 " + sha256_hex("nothing"));
}

TEST_F(PypiTest, IndexHashDisagreeingWithThePinIsAnError) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/lying/")};
  auto got = fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0.tar.gz", sha256_hex(sdist_));
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "sha256 mismatch for demo_pkg-1.0.tar.gz: the manifest pins " +
                                     sha256_hex(sdist_) + ", the index " + server_->url("/lying/") +
                                     " lists " + sha256_hex("other"));
  EXPECT_EQ(paths(), (std::vector<std::string>{"/lying/demo-pkg/"}));  // nothing downloaded
  EXPECT_TRUE(tree_listing(cache_ / "downloads").empty());
}

TEST_F(PypiTest, MissingFileAndProjectAreNamed) {
  Downloader d(*http_, store_, false);
  Context ctx{d, server_->url("/json/")};
  auto typo = fetch_index_file(ctx, "demo-pkg", "demo_pkg-1.0.tar.bz", sha256_hex(sdist_));
  ASSERT_FALSE(typo);
  EXPECT_EQ(typo.error().message, "demo_pkg-1.0.tar.bz is not on " + server_->url("/json/") +
                                      " for project 'demo-pkg'; did you mean demo_pkg-1.0.tar.gz?");
  auto project = fetch_index_file(ctx, "nope", "nope-1.0.tar.gz", sha256_hex(sdist_));
  ASSERT_FALSE(project);
  EXPECT_EQ(project.error().message, "project 'nope' is not on the index " +
                                         server_->url("/json/") + " (HTTP 404 for " +
                                         server_->url("/json/nope/") + ")");
  EXPECT_EQ(server_->requests().size(), 2u);  // a 404 page is not retried
  EXPECT_TRUE(tree_listing(cache_ / "downloads").empty());
}

}  // namespace kiln::fetch
