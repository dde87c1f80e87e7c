// The download cache's logic (retries, resume, verification, offline) over the fake HttpClient.
#include "fetch/downloader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "../support/fake_http.h"
#include "../support/fetch_util.h"
#include "cache/dir_lock.h"
#include "cache/store.h"
#include "core/hash.h"
#include "core/lock.h"
#include "core/strings.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::fetch {

using kiln::testing::FakeAnswer;
using kiln::testing::FakeHttp;
using kiln::testing::test_bytes;
using kiln::testing::tree_listing;
using std::chrono::milliseconds;

class DownloaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    cache_ = dir_->path() / "cache";
    store_ = cache::Store(cache_);
  }
  std::vector<std::string> downloads() const { return tree_listing(cache_ / "downloads"); }

  std::optional<TempDir> dir_;
  fs::path cache_;
  cache::Store store_{fs::path()};  // the cache at cache_
  FakeHttp http_;
  std::vector<long> sleeps_;
  const std::string body_ = test_bytes(1000);
  const std::string sha_ = sha256_hex(body_);
  const std::string url_ = "https://files.example/pkg-1.0.tar.gz";
};

// Downloader holds atomics (not movable), so the tests build it in place.
#define MAKE_DOWNLOADER(name, ...)             \
  Downloader name(http_, store_, __VA_ARGS__); \
  name.set_sleep([this](milliseconds ms) { sleeps_.push_back(ms.count()); })

TEST_F(DownloaderTest, DownloadsVerifiesAndPublishesUnderItsSha256) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {200, body_});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_TRUE(got.downloaded);
  EXPECT_EQ(got.path, cache_ / "downloads" / sha_.substr(0, 2) / sha_ / "pkg-1.0.tar.gz");
  EXPECT_EQ(read_file(got.path).value(), body_);
  EXPECT_EQ(d.network_downloads(), 1);
  EXPECT_EQ(d.network_bytes(), body_.size());
  EXPECT_EQ(downloads(),
            (std::vector<std::string>{sha_.substr(0, 2) + "/", sha_.substr(0, 2) + "/" + sha_ + "/",
                                      sha_.substr(0, 2) + "/" + sha_ + "/pkg-1.0.tar.gz"}));
}

TEST_F(DownloaderTest, CachedFileMeansNoRequestAtAll) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {200, body_});
  d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  ASSERT_EQ(http_.requests.size(), 1u);
  auto again = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_FALSE(again.downloaded);
  EXPECT_EQ(http_.requests.size(), 1u);
  EXPECT_EQ(d.network_downloads(), 1);
  // Offline too, and whatever the URL.
  MAKE_DOWNLOADER(offline, true);
  EXPECT_EQ(offline.fetch("https://elsewhere/x", "pkg-1.0.tar.gz", sha_).value().path, again.path);
  EXPECT_EQ(http_.requests.size(), 1u);
  EXPECT_EQ(offline.find_cached(sha_).value(), again.path);
  EXPECT_FALSE(offline.find_cached(sha256_hex("other")).has_value());
}

TEST_F(DownloaderTest, OfflineMissingFileSaysSoWithoutNetwork) {
  MAKE_DOWNLOADER(d, true);
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(
      got.error().message,
      "pkg-1.0.tar.gz (sha256 " + sha_ +
          ") is not in the download cache and --offline forbids downloading it; fetch it first "
          "where the network is reachable (`kiln fetch` with the same packages and "
          "--target, into this cache), then build --offline");
  EXPECT_TRUE(http_.requests.empty());
  EXPECT_TRUE(downloads().empty());
  EXPECT_FALSE(d.get_text("https://pypi.org/simple/x/", {}));
  EXPECT_TRUE(http_.requests.empty());
}

TEST_F(DownloaderTest, MismatchDeletesTheTempFileAndPublishesNothing) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {200, "not the pinned bytes"});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "sha256 mismatch for pkg-1.0.tar.gz: expected " + sha_ + ", got " +
                                     sha256_hex("not the pinned bytes"));
  EXPECT_EQ(http_.requests.size(), 1u);  // a mismatch is not retried
  EXPECT_TRUE(downloads().empty());
  EXPECT_EQ(d.network_downloads(), 0);
}

TEST_F(DownloaderTest, ServerErrorsAreRetriedWithBackoffThenFail) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {503, ""});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message,
            "cannot download pkg-1.0.tar.gz from " + url_ + ": HTTP 503 (3 attempts)");
  EXPECT_EQ(http_.requests.size(), 3u);
  EXPECT_EQ(sleeps_, (std::vector<long>{1000, 2000}));
  EXPECT_TRUE(downloads().empty());
}

TEST_F(DownloaderTest, TooManyRequestsAndConnectionErrorsAreRetried) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {429, ""});
  http_.add(url_, {0, "", Transport::ConnectFailed});
  http_.add(url_, {200, body_});
  EXPECT_TRUE(d.fetch(url_, "pkg-1.0.tar.gz", sha_).value().downloaded);
  EXPECT_EQ(http_.requests.size(), 3u);
  EXPECT_EQ(sleeps_, (std::vector<long>{1000, 2000}));
}

TEST_F(DownloaderTest, ClientErrorsAndTlsFailuresAreNotRetried) {
  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {404, ""});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "cannot download pkg-1.0.tar.gz from " + url_ + ": HTTP 404");
  EXPECT_EQ(http_.requests.size(), 1u);

  std::string other = "https://files.example/other.tar.gz";
  http_.add(other, {0, "", Transport::Failed});
  EXPECT_FALSE(d.fetch(other, "other.tar.gz", sha_));
  EXPECT_EQ(http_.requests.size(), 2u);
  EXPECT_TRUE(sleeps_.empty());
  EXPECT_TRUE(downloads().empty());
}

TEST_F(DownloaderTest, BrokenTransferResumesWithRange) {
  MAKE_DOWNLOADER(d, false);
  FakeAnswer cut{200, body_};
  cut.cut = 300;
  http_.add(url_, cut);
  http_.add(url_, {200, body_});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  ASSERT_EQ(http_.requests.size(), 2u);
  EXPECT_EQ(http_.requests[0].offset, 0u);
  EXPECT_EQ(http_.requests[1].offset, 300u);
  EXPECT_EQ(d.network_bytes(), 1000u);  // 300 + the 700 left
  EXPECT_EQ(downloads().size(), 3u);    // two directories and the file: no .part left
}

TEST_F(DownloaderTest, ServerWithoutRangesRestartsFromZero) {
  MAKE_DOWNLOADER(d, false);
  FakeAnswer cut{200, body_};
  cut.cut = 300;
  cut.ranges = false;
  FakeAnswer whole{200, body_};
  whole.ranges = false;
  http_.add(url_, cut);
  http_.add(url_, whole);
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);  // not the first 300 bytes twice
  EXPECT_EQ(http_.requests[1].offset, 300u);      // asked, and got a 200
}

TEST_F(DownloaderTest, BrokenEveryTimeKeepsTheResumablePartFile) {
  MAKE_DOWNLOADER(d, false);
  FakeAnswer cut{200, body_};
  cut.cut = 100;
  http_.add(url_, cut);
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.error().message, "cannot download pkg-1.0.tar.gz from " + url_ +
                                     ": transfer broke off: fake: cut short (3 attempts)");
  fs::path part = cache_ / "downloads" / sha_.substr(0, 2) / sha_ / "pkg-1.0.tar.gz.part";
  EXPECT_NE(got.error().detail.find(part.string()), std::string::npos);
  EXPECT_EQ(read_file(part).value(), body_.substr(0, 300));  // 100 bytes per attempt, resumed
  auto left = downloads();
  EXPECT_EQ(left.back(), sha_.substr(0, 2) + "/" + sha_ + "/pkg-1.0.tar.gz.part");
  EXPECT_EQ(left.size(), 3u);

  // The next run resumes where it stopped.
  http_.reset(url_);
  http_.add(url_, {200, body_});
  http_.requests.clear();
  EXPECT_EQ(read_file(d.fetch(url_, "pkg-1.0.tar.gz", sha_).value().path).value(), body_);
  ASSERT_EQ(http_.requests.size(), 1u);
  EXPECT_EQ(http_.requests[0].offset, 300u);
}

TEST_F(DownloaderTest, CompletePartFileIsPublishedOn416) {
  MAKE_DOWNLOADER(d, false);
  fs::path part = layout(store_).download_path(sha_, "pkg-1.0.tar.gz");
  part += ".part";
  kiln::testing::write_text(part, body_);  // a run that died between download and rename
  http_.add(url_, {200, body_});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  ASSERT_EQ(http_.requests.size(), 1u);
  EXPECT_EQ(http_.requests[0].offset, body_.size());
  EXPECT_FALSE(fs::exists(part));
}

TEST_F(DownloaderTest, ResumedMismatchStartsOverOnce) {
  MAKE_DOWNLOADER(d, false);
  fs::path part = layout(store_).download_path(sha_, "pkg-1.0.tar.gz");
  part += ".part";
  kiln::testing::write_text(part, "stale bytes of another file");
  http_.add(url_, {200, body_});
  auto got = d.fetch(url_, "pkg-1.0.tar.gz", sha_).value();
  EXPECT_EQ(read_file(got.path).value(), body_);
  ASSERT_EQ(http_.requests.size(), 2u);
  EXPECT_GT(http_.requests[0].offset, 0u);
  EXPECT_EQ(http_.requests[1].offset, 0u);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(DownloaderTest, RejectsBadPinsAndNames) {
  MAKE_DOWNLOADER(d, false);
  EXPECT_EQ(d.fetch(url_, "x.tar.gz", "ABC").error().kind, ErrorKind::BadInput);
  EXPECT_EQ(d.fetch(url_, "x.tar.gz", std::string(64, 'A')).error().kind, ErrorKind::BadInput);
  for (std::string bad :
       std::vector<std::string>{"", ".", "..", "a/b", "../x", "x.part", std::string("a\nb")})
    EXPECT_EQ(d.fetch(url_, bad, sha_).error().kind, ErrorKind::BadInput) << bad;
  EXPECT_EQ(d.fetch("ftp://x/y.tar.gz", "y.tar.gz", sha_).error().kind, ErrorKind::BadInput);
  EXPECT_TRUE(http_.requests.empty());
  EXPECT_TRUE(downloads().empty());
}

TEST_F(DownloaderTest, ImportsLocalFilesVerified) {
  MAKE_DOWNLOADER(d, true);  // a local file is no download: fine offline
  fs::path src = dir_->path() / "src.tar.gz";
  kiln::testing::write_text(src, body_);
  auto got = d.import_file(src, "src.tar.gz", sha_).value();
  EXPECT_FALSE(got.downloaded);
  EXPECT_EQ(read_file(got.path).value(), body_);
  // A file:// URL the user wrote takes the same road; one a stranger wrote is refused.
  fs::path other = dir_->path() / "a b.zip";
  kiln::testing::write_text(other, "zip bytes");
  const std::string url = "file://" + dir_->path().string() + "/a%20b.zip";
  ASSERT_FALSE(d.fetch(url, "a b.zip", sha256_hex("zip bytes")));
  EXPECT_FALSE(d.find_cached(sha256_hex("zip bytes")));
  auto via_url =
      d.fetch(url, "a b.zip", sha256_hex("zip bytes"), std::nullopt, UrlFrom::User).value();
  EXPECT_EQ(read_file(via_url.path).value(), "zip bytes");

  auto bad = d.import_file(src, "src2.tar.gz", sha256_hex("something else"));
  ASSERT_FALSE(bad);
  // A local file's own hash is never shown (a manifest could name any file kiln can read).
  EXPECT_EQ(bad.error().message, "sha256 mismatch for " + src.string() +
                                     ": its content does not match the pinned " +
                                     sha256_hex("something else"));
  EXPECT_EQ(bad.error().message.find(sha_), std::string::npos);
  EXPECT_EQ(bad.error().detail.find(sha_), std::string::npos);
  EXPECT_FALSE(d.find_cached(sha256_hex("something else")).has_value());
  EXPECT_FALSE(fs::exists(cache_ / "downloads" / sha256_hex("something else").substr(0, 2)));
  EXPECT_TRUE(http_.requests.empty());
}

TEST_F(DownloaderTest, LocalFilesAreRegularFilesOnRealFileSystemsReadWithoutBlocking) {
  MAKE_DOWNLOADER(d, false);
  // Online, a stranger's file:// URL is refused as a scheme, never opened.
  auto stranger = d.fetch("file:///etc/passwd", "torch-2.11.0-cp311-cp311-linux_x86_64.whl",
                          sha256_hex(read_file("/etc/passwd").value()));
  ASSERT_FALSE(stranger);
  EXPECT_EQ(stranger.error().kind, ErrorKind::BadInput);
  EXPECT_NE(stranger.error().message.find("expected an http:// or https:// URL"),
            std::string::npos);
  EXPECT_TRUE(downloads().empty());
  // Pseudo-files ("regular files" of /proc and /sys) are refused before a byte is read:
  // /proc/kmsg would block in the kernel, deaf to SIGTERM.
  for (const char* pseudo :
       {"/proc/self/status", "/proc/kmsg", "/sys/kernel/mm/transparent_hugepage/enabled"}) {
    if (!fs::exists(pseudo)) continue;
    auto got = d.import_file(pseudo, "x.tar.gz", sha_);
    ASSERT_FALSE(got) << pseudo;
    EXPECT_NE(got.error().message.find("kernel pseudo-file system"), std::string::npos)
        << got.error().message;
  }
  // A FIFO nobody writes to: refused at once, not waited on.
  fs::path fifo = dir_->path() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto got = d.fetch("file://" + fifo.string(), "x.tar.gz", sha_, std::nullopt, UrlFrom::User);
  ASSERT_FALSE(got);
  EXPECT_NE(got.error().message.find("not a file"), std::string::npos) << got.error().message;
  // A local file is bounded like a download.
  fs::path big = dir_->path() / "big";
  kiln::testing::write_text(big, std::string(4096, 'b'));
  d.set_max_bytes(1000);
  auto over = d.import_file(big, "big.tar.gz", sha256_hex(std::string(4096, 'b')));
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("larger than the limit of 1000 bytes"), std::string::npos);
  EXPECT_TRUE(downloads().empty());
}

TEST_F(DownloaderTest, GetTextRetriesServerErrorsButReturnsClientErrors) {
  MAKE_DOWNLOADER(d, false);
  std::string page = "https://index.example/simple/x/";
  http_.add(page, {502, ""});
  http_.add(page, {200, "hello"});
  auto r = d.get_text(page, {{"Accept", "text/html"}}).value();
  EXPECT_EQ(r.body, "hello");
  EXPECT_EQ(http_.requests.size(), 2u);
  EXPECT_EQ(http_.requests[0].headers, (Headers{{"Accept", "text/html"}}));

  std::string missing = "https://index.example/simple/y/";
  http_.add(missing, {404, ""});
  EXPECT_EQ(d.get_text(missing, {}).value().status, 404);
  EXPECT_EQ(http_.requests.size(), 3u);

  std::string down = "https://index.example/simple/z/";
  http_.add(down, {0, "", Transport::TimedOut});
  auto err = d.get_text(down, {});
  ASSERT_FALSE(err);
  EXPECT_EQ(err.error().message, "cannot read " + down + ": timed out: fake failure (3 attempts)");
}

// A link planted where a download's directory belongs (<cache>/downloads/<sha[0:2]>/<sha256>) is
// refused by the directory's lock, not followed: nothing is locked or written where it points.
TEST_F(DownloaderTest, ALinkAtADownloadsLockedDirectoryIsNotFollowed) {
  fs::path outside = dir_->path() / "outside";
  fs::create_directories(outside);
  fs::path at = layout(store_).download_path(sha_, "pkg-1.0.tar.gz").parent_path();
  fs::create_directories(at.parent_path());
  fs::create_directory_symlink(outside, at);

  auto lock = cache::DirLock::acquire(at);
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().message,
            cat("cannot open directory ", at.string(), ": it is a symbolic link or no directory"));
  EXPECT_TRUE(FileLock::try_acquire(outside));  // the directory it names was never locked

  MAKE_DOWNLOADER(d, false);
  http_.add(url_, {200, body_});
  EXPECT_FALSE(d.fetch(url_, "pkg-1.0.tar.gz", sha_));
  EXPECT_TRUE(http_.requests.empty());
  EXPECT_TRUE(fs::is_empty(outside));
  EXPECT_TRUE(fs::is_symlink(at));
}

TEST(DirLockTest, LocksADirectoryItMakes) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-dirlock-").value();
  fs::path at = dir.path() / "a" / "b";
  {
    cache::DirLock lock = cache::DirLock::acquire(at).value();
    EXPECT_TRUE(fs::is_directory(at));
    EXPECT_FALSE(FileLock::try_acquire(at));  // held
  }
  EXPECT_TRUE(FileLock::try_acquire(at));  // let go
}

}  // namespace kiln::fetch
