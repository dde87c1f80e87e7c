// The libcurl client and the download cache against a real HTTP server on 127.0.0.1
// (tests/support/http_server.py).
#include <gtest/gtest.h>

#include <chrono>

#include "../support/fetch_util.h"
#include "../support/http_server.h"
#include "cache/store.h"
#include "core/hash.h"
#include "fetch/downloader.h"
#include "fetch/http.h"

namespace kiln::fetch {

using kiln::testing::HttpServer;
using kiln::testing::ScopedEnv;
using kiln::testing::test_bytes;
using kiln::testing::tree_listing;
using kiln::testing::write_text;
using std::chrono::milliseconds;

class CurlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    cache_ = dir_->path() / "cache";
    store_ = cache::Store(cache_);
    write_text(dir_->path() / "www" / "pkg-1.0.tar.gz", body_);
    server_.emplace(dir_->path() / "www");
  }
  std::vector<std::string> downloads() const { return tree_listing(cache_ / "downloads"); }
  fs::path part_path() const {
    return cache_ / "downloads" / sha_.substr(0, 2) / sha_ / "pkg-1.0.tar.gz.part";
  }
  std::vector<std::string> ranges() const {
    std::vector<std::string> out;
    for (const auto& r : server_->requests()) out.push_back(r["range"].get<std::string>());
    return out;
  }

  ScopedEnv no_proxy_{"no_proxy", "127.0.0.1,localhost"};
  std::optional<TempDir> dir_;
  fs::path cache_;
  cache::Store store_{fs::path()};  // the cache at cache_
  std::optional<HttpServer> server_;
  std::unique_ptr<HttpClient> http_ = make_curl_client();
  std::vector<long> sleeps_;
  const std::string body_ = test_bytes(20000);
  const std::string sha_ = sha256_hex(body_);
};

#define MAKE_CURL_DOWNLOADER(name, offline) \
  Downloader name(*http_, store_, offline); \
  name.set_sleep([this](milliseconds ms) { sleeps_.push_back(ms.count()); })

TEST_F(CurlTest, DownloadsAndSendsKilnUserAgent) {
  MAKE_CURL_DOWNLOADER(d, false);
  auto got = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(read_file(got.path).value(), body_);
  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0]["user_agent"], user_agent());
  EXPECT_EQ(user_agent().rfind("kiln/", 0), 0u);
  EXPECT_EQ(requests[0]["range"], "");
  EXPECT_EQ(d.network_downloads(), 1);
}

TEST_F(CurlTest, NotFoundFailsAtOnceLeavingNothing) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string url = server_->url("/status/404/pkg-1.0.tar.gz");
  auto got = d.fetch(url, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "cannot download pkg-1.0.tar.gz from " + url + ": HTTP 404");
  EXPECT_EQ(server_->requests().size(), 1u);
  EXPECT_TRUE(downloads().empty());
}

TEST_F(CurlTest, ServerErrorIsRetriedThenFailsLeavingNothing) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string url = server_->url("/status/500/pkg-1.0.tar.gz");
  auto got = d.fetch(url, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "cannot download pkg-1.0.tar.gz from " + url + ": HTTP 500 (3 attempts)");
  EXPECT_EQ(server_->requests().size(), 3u);
  EXPECT_EQ(sleeps_, (std::vector<long>{1000, 2000}));
  EXPECT_TRUE(downloads().empty());
}

TEST_F(CurlTest, ServerErrorThenSuccess) {
  MAKE_CURL_DOWNLOADER(d, false);
  auto got = d.fetch(server_->url("/flaky/2/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  EXPECT_EQ(server_->requests().size(), 3u);
}

TEST_F(CurlTest, ConnectionRefusedIsRetriedThenFailsLeavingNothing) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string url = cat("http://127.0.0.1:", kiln::testing::closed_port(), "/pkg-1.0.tar.gz");
  auto got = d.fetch(url, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message.rfind(
                "cannot download pkg-1.0.tar.gz from " + url + ": connection failed: ", 0),
            0u)
      << got.error().message;
  EXPECT_NE(got.error().message.find("(3 attempts)"), std::string::npos);
  EXPECT_EQ(sleeps_.size(), 2u);
  EXPECT_TRUE(downloads().empty());
}

TEST_F(CurlTest, TruncatedDownloadIsNotPublishedAndTheRetryResumes) {
  MAKE_CURL_DOWNLOADER(d, false);
  auto got = d.fetch(server_->url("/truncate/3000/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  EXPECT_EQ(ranges(), (std::vector<std::string>{"", "bytes=3000-"}));
  EXPECT_EQ(d.network_bytes(), body_.size());
  EXPECT_FALSE(fs::exists(part_path()));
}

TEST_F(CurlTest, AlwaysTruncatedKeepsOnlyTheResumablePartFile) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string url = server_->url("/always-truncate/1000/pkg-1.0.tar.gz");
  auto got = d.fetch(url, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message.rfind(
                "cannot download pkg-1.0.tar.gz from " + url + ": transfer broke off: ", 0),
            0u)
      << got.error().message;
  EXPECT_EQ(ranges(), (std::vector<std::string>{"", "bytes=1000-", "bytes=2000-"}));
  EXPECT_EQ(read_file(part_path()).value(), body_.substr(0, 3000));
  std::string sha_dir = sha_.substr(0, 2) + "/" + sha_ + "/";
  EXPECT_EQ(downloads(), (std::vector<std::string>{sha_.substr(0, 2) + "/", sha_dir,
                                                   sha_dir + "pkg-1.0.tar.gz.part"}));

  // A later run resumes from the .part file.
  auto again = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(again.path).value(), body_);
  EXPECT_EQ(ranges().back(), "bytes=3000-");
  EXPECT_FALSE(fs::exists(part_path()));
}

TEST_F(CurlTest, ServerIgnoringRangeRestartsTheFile) {
  MAKE_CURL_DOWNLOADER(d, false);
  write_text(part_path(), "junk that is not the start of the file");
  auto got = d.fetch(server_->url("/norange/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  EXPECT_EQ(server_->requests().size(), 1u);
}

TEST_F(CurlTest, HashMismatchDeletesTheTempFileAndCachesNothing) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string pin = sha256_hex("other bytes");
  auto got = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", pin);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "sha256 mismatch for pkg-1.0.tar.gz: expected " + pin + ", got " + sha_);
  EXPECT_TRUE(downloads().empty());
  EXPECT_EQ(d.network_downloads(), 0);
}

TEST_F(CurlTest, SecondFetchDoesNoNetworkIo) {
  MAKE_CURL_DOWNLOADER(d, false);
  std::string url = server_->url("/pkg-1.0.tar.gz");
  auto first = d.fetch(url, "pkg-1.0.tar.gz", sha_).value();
  server_->stop();
  auto second = d.fetch(url, "pkg-1.0.tar.gz", sha_);
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_FALSE(second->downloaded);
  EXPECT_EQ(second->path, first.path);
  EXPECT_EQ(d.network_downloads(), 1);
}

TEST_F(CurlTest, OfflineNeverConnects) {
  MAKE_CURL_DOWNLOADER(d, true);
  auto got = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(
      got.error().message,
      "pkg-1.0.tar.gz (sha256 " + sha_ +
          ") is not in the download cache and --offline forbids downloading it; fetch it first "
          "where the network is reachable (`kiln fetch` with the same packages and "
          "--target, into this cache), then build --offline");
  EXPECT_TRUE(server_->requests().empty());
  EXPECT_TRUE(downloads().empty());
}

TEST_F(CurlTest, FollowsRedirects) {
  MAKE_CURL_DOWNLOADER(d, false);
  auto got = d.fetch(server_->url("/redirect/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  EXPECT_EQ(server_->requests().size(), 2u);
}

TEST_F(CurlTest, ClientReportsStatusHeadersFinalUrlAndRanges) {
  auto r = http_->get(server_->url("/redirect/pkg-1.0.tar.gz"), {{"Accept", "text/html"}});
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.body, body_);
  EXPECT_EQ(r.final_url, server_->url("/pkg-1.0.tar.gz"));
  EXPECT_EQ(r.header("Content-Length"), std::to_string(body_.size()));
  EXPECT_EQ(server_->requests().back()["accept"], "text/html");

  auto missing = http_->get(server_->url("/status/404/x"), {});
  EXPECT_EQ(missing.transport, Transport::Ok);
  EXPECT_EQ(missing.status, 404);
  EXPECT_FALSE(missing.retryable());

  // A 206 lands at the offset; the bytes before it stay.
  fs::path file = dir_->path() / "partial";
  write_text(file, body_.substr(0, 5000) + "bytes past the offset are cut");
  auto ranged = http_->download(server_->url("/pkg-1.0.tar.gz"), file, 5000, UINT64_MAX);
  EXPECT_EQ(ranged.status, 206);
  EXPECT_EQ(read_file(file).value(), body_);
  // A 404 body never reaches the file, nor creates it.
  auto not_found =
      http_->download(server_->url("/status/404/x"), dir_->path() / "absent", 0, UINT64_MAX);
  EXPECT_EQ(not_found.status, 404);
  EXPECT_FALSE(fs::exists(dir_->path() / "absent"));
}

TEST_F(CurlTest, StalledTransferTimesOut) {
  CurlOptions options;
  options.low_speed_limit = 1000;
  options.low_speed_time_s = 1;
  auto client = make_curl_client(options);
  auto start = std::chrono::steady_clock::now();
  auto r = client->download(server_->url("/stall/pkg-1.0.tar.gz"), dir_->path() / "stalled", 0,
                            UINT64_MAX);
  EXPECT_EQ(r.transport, Transport::TimedOut) << r.error;
  EXPECT_TRUE(r.retryable());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(read_file(dir_->path() / "stalled").value(), body_.substr(0, 10));  // kept for a resume
}

// An endless body (no Content-Length) stops at the download limit: an error, and nothing kept.
TEST_F(CurlTest, EndlessBodyStopsAtTheLimitAndLeavesNothing) {
  MAKE_CURL_DOWNLOADER(d, false);
  d.set_max_bytes(1 << 20);
  auto got = d.fetch(server_->url("/endless/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message.find("larger than the download limit of 1048576 bytes"),
            std::string::npos)
      << got.error().message;
  EXPECT_LE(d.network_bytes(), 1u << 20);
  EXPECT_EQ(server_->requests().size(), 1u);  // not retried
  EXPECT_TRUE(downloads().empty());
}

// The index's (or the manifest's) size bounds the download, whatever the server sends.
TEST_F(CurlTest, StatedSizeBoundsTheDownload) {
  MAKE_CURL_DOWNLOADER(d, false);
  auto got = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_, 5000);
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message.find("larger than its stated size of 5000 bytes"),
            std::string::npos)
      << got.error().message;
  EXPECT_EQ(d.network_bytes(), 0u);  // refused on its Content-Length, before a byte was written
  EXPECT_TRUE(downloads().empty());
  // A .part left larger than the limit is not resumed but removed.
  write_text(part_path(), body_);
  got = d.fetch(server_->url("/endless/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_, 5000);
  ASSERT_FALSE(got.has_value());
  EXPECT_FALSE(fs::exists(part_path()));
  EXPECT_EQ(ranges().back(), "");
  // The exact size passes.
  auto exact = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_, body_.size());
  ASSERT_TRUE(exact.has_value()) << exact.error().message;
}

// A stated size above the download limit (an index may state anything) is refused before a request.
TEST_F(CurlTest, StatedSizeAboveTheLimitIsRefused) {
  MAKE_CURL_DOWNLOADER(d, false);
  d.set_max_bytes(body_.size() - 1);
  auto got = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_, body_.size());
  ASSERT_FALSE(got.has_value());
  EXPECT_NE(got.error().message.find("is above the download limit of"), std::string::npos)
      << got.error().message;
  EXPECT_TRUE(server_->requests().empty());
  EXPECT_TRUE(downloads().empty());
  d.set_max_bytes(body_.size());
  auto ok = d.fetch(server_->url("/pkg-1.0.tar.gz"), "pkg-1.0.tar.gz", sha_, body_.size());
  ASSERT_TRUE(ok.has_value()) << ok.error().message;
}

TEST_F(CurlTest, MissingCaBundleIsNamed) {
  ScopedEnv cert("PIP_CERT", "/nonexistent/ca.pem");
  auto r = http_->get("https://127.0.0.1:1/", {});
  EXPECT_EQ(r.transport, Transport::Failed);
  EXPECT_EQ(r.error, "$PIP_CERT names '/nonexistent/ca.pem', which is not a file");
  EXPECT_TRUE(server_->requests().empty());
}

// A static kiln has no compiled-in bundle every system holds: it takes the environment's, else the
// first of the systems' places that exists (RHEL's when Debian's is absent).
TEST_F(CurlTest, CaBundleIsTheEnvironmentsElseTheFirstSystemPlaceThere) {
  ScopedEnv pip("PIP_CERT", nullptr), requests("REQUESTS_CA_BUNDLE", nullptr),
      ssl("SSL_CERT_FILE", nullptr);
  fs::path rhel = dir_->path() / "etc/pki/tls/certs/ca-bundle.crt";
  fs::path suse = dir_->path() / "etc/ssl/ca-bundle.pem";
  write_text(rhel, "bundle");
  write_text(suse, "bundle");
  std::vector<std::string> places = {(dir_->path() / "etc/ssl/certs/ca-certificates.crt").string(),
                                     rhel.string(), suse.string()};
  EXPECT_EQ(ca_bundle_file(places).value(), rhel.string());
  EXPECT_EQ(ca_bundle_file({places[0]}).value(), "");
  {
    ScopedEnv named("SSL_CERT_FILE", suse.c_str());
    EXPECT_EQ(ca_bundle_file(places).value(), suse.string());
    ScopedEnv first("REQUESTS_CA_BUNDLE", rhel.c_str());
    EXPECT_EQ(ca_bundle_file(places).value(), rhel.string());
  }
  ScopedEnv folder("PIP_CERT", dir_->path().c_str());
  EXPECT_FALSE(ca_bundle_file(places));
  // The systems' list holds the places of the families torch's wheels run on.
  for (const char* place :
       {"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
        "/etc/ssl/ca-bundle.pem", "/etc/ssl/cert.pem"})
    EXPECT_NE(std::ranges::find(kSystemCaBundles, place), kSystemCaBundles.end()) << place;
}

}  // namespace kiln::fetch
