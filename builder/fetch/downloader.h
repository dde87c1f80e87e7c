// The download cache: files pinned by sha256 where the cache's Store puts them
// (cache::Store::download_path: <cache>/downloads/<sha[0:2]>/<sha256>/<filename>), fetched with
// bounded retries and Range resume, verified before they are published.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/store.h"
#include "core/expected.h"
#include "fetch/http.h"
#include "fetch/progress.h"

namespace kiln::fetch {

struct RetryPolicy {
  int attempts = 3;
  // The wait before the 2nd, 3rd, ... attempt (the last one repeats).
  std::vector<std::chrono::milliseconds> backoff = {std::chrono::milliseconds(1000),
                                                    std::chrono::milliseconds(2000)};
};

// Who wrote a URL. The user's own files and flags (a manifest's `url`, a mirror from apt's
// configuration) may name a local file; a URL a stranger wrote (an index page's link, PEP 658
// metadata, a remote) is http(s) only, whatever the caller forgets.
enum class UrlFrom { Stranger, User };

struct CachedFile {
  std::filesystem::path path;  // in the download cache
  bool downloaded = false;     // false: it was already there (or came from a local file)
};

class Downloader {
 public:
  // `store`: the cache whose download cache (and git mirrors) this fills; it must outlive the
  // Downloader. `offline`: never touch the network; only cached files (and local files) can be had.
  Downloader(HttpClient& http, const cache::Store& store, bool offline);
  Downloader(HttpClient& http, cache::Store&& store, bool offline) = delete;  // would dangle

  // How waits between attempts happen (tests record them instead of sleeping).
  void set_sleep(std::function<void(std::chrono::milliseconds)> sleep) {
    sleep_ = std::move(sleep);
  }

  // Where transfers show their progress (none by default; the CLI's: DownloadProgress::to_stderr).
  void set_progress(std::shared_ptr<DownloadProgress> progress) { progress_ = std::move(progress); }

  // The published file, if it is there; with an empty `filename`, any file cached under sha256.
  std::optional<std::filesystem::path> find_cached(const std::string& sha256,
                                                   const std::string& filename = {}) const;

  // The file pinned by `sha256`: from the cache when it is there (no network I/O at all), else
  // from `url` (http or https; file://, copied like import_file, only when `from` is User). The
  // bytes go to
  // "<filename>.part" beside the final path; attempts that fail on a connection error, a timeout,
  // a broken transfer, HTTP 5xx or 429 are retried (RetryPolicy), resuming from the .part file's
  // size when the server answers a Range request with 206, else starting over. The file is
  // published (renamed) only once its sha256 matches; a mismatch deletes the .part file. After a
  // failure, nothing is left but a non-empty .part file of a transfer that broke off (for the
  // next run to resume). The file may not grow past `size` when it is known (the index's PEP 700
  // size, a manifest's `size`), else past max_bytes(): a larger one is an error and its .part is
  // removed.
  Expected<CachedFile> fetch(const std::string& url, const std::string& filename,
                             const std::string& sha256, std::optional<std::uint64_t> size = {},
                             UrlFrom from = UrlFrom::Stranger);

  // The size limit of a download whose size nobody states (default kDefaultMaxBytes).
  static constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t(4) << 30;
  void set_max_bytes(std::uint64_t bytes) { max_bytes_ = bytes; }
  std::uint64_t max_bytes() const { return max_bytes_; }

  // Copies a local file into the cache under `filename`, verified by sha256 (allowed offline). Only
  // a regular file on a real file system, opened without blocking (a FIFO, a device, /proc/kmsg
  // or anything under /proc, /sys and the kernel's other pseudo-file systems are refused), read
  // in chunks that yield to SIGINT/SIGTERM, and never past max_bytes().
  Expected<CachedFile> import_file(const std::filesystem::path& file, const std::string& filename,
                                   const std::string& sha256);

  // A file nobody has pinned yet (kiln fetch --print-sha256) and its sha256. fetch_unpinned
  // downloads an http(s) `url` as fetch() does (its retries and limits, `size` when stated; no
  // resume across runs) into a staging directory of the cache; import_unpinned copies a local file
  // as import_file() reads one. Then the bytes are hashed and published under `filename`.
  // fetch_unpinned is refused offline: there is no pin to find a cached file by.
  struct Unpinned {
    CachedFile file;
    std::string sha256;
  };
  Expected<Unpinned> fetch_unpinned(const std::string& url, const std::string& filename,
                                    std::optional<std::uint64_t> size);
  Expected<Unpinned> import_unpinned(const std::filesystem::path& file,
                                     const std::string& filename);

  // GET a small text (an index page) with the same retries; an answer with any HTTP status is
  // returned, transfers that never produced an answer are errors. Refused offline.
  Expected<HttpResponse> get_text(const std::string& url, const Headers& request_headers);

  // The error for a file the cache lacks in offline mode.
  Error offline_error(const std::string& filename, const std::string& sha256) const;

  bool offline() const { return offline_; }
  const cache::Store& store() const { return store_; }
  HttpClient& http() { return http_; }

  // Files fetched over the network (published), and their bytes, since construction.
  int network_downloads() const { return downloads_.load(); }
  std::uint64_t network_bytes() const { return bytes_.load(); }

 private:
  // Where one download goes: `partial` first (resumed when it is there), then `publish` makes it
  // `file` (a download slot's, or a file in a staging directory that is its own partial file).
  struct Destination {
    std::filesystem::path partial, file;
    std::function<Expected<void>()> publish;
  };
  Expected<CachedFile> download_locked(const std::string& url, const std::string& filename,
                                       const std::string& sha256, const Destination& to,
                                       std::optional<std::uint64_t> size);
  HttpResponse transfer(const std::string& url, const std::string& filename,
                        const std::filesystem::path& part, std::uint64_t offset,
                        std::uint64_t limit, std::optional<std::uint64_t> size);
  void wait_before(int attempt);

  HttpClient& http_;
  const cache::Store& store_;
  bool offline_;
  RetryPolicy policy_;
  std::uint64_t max_bytes_ = kDefaultMaxBytes;
  std::function<void(std::chrono::milliseconds)> sleep_;
  std::shared_ptr<DownloadProgress> progress_;
  std::atomic<int> downloads_{0};
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace kiln::fetch
