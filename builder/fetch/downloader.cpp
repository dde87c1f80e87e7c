#include "fetch/downloader.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/fs.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/url.h"

namespace kiln::fetch {

namespace {

constexpr std::string_view kPartSuffix = cache::kPartialSuffix;

Expected<void> check_pin(const std::string& filename, const std::string& sha256) {
  if (!is_safe_filename(filename))
    return Error::bad_input(cat("bad file name '", filename, "': expected one plain file name"));
  if (filename.ends_with(kPartSuffix))
    return Error::bad_input(cat("bad file name '", filename, "': kiln keeps names ending in ",
                                kPartSuffix, " for partial downloads"));
  if (!is_sha256_hex(sha256))
    return Error::bad_input(cat("bad sha256 '", sha256, "' for ", filename,
                                ": expected 64 lowercase hexadecimal digits"));
  return {};
}

std::uint64_t size_or_zero(const fs::path& file) {
  std::error_code ec;
  auto size = fs::file_size(file, ec);
  return ec ? 0 : static_cast<std::uint64_t>(size);
}

void remove_if_empty_file(const fs::path& file) {
  std::error_code ec;
  if (fs::exists(file, ec) && size_or_zero(file) == 0) fs::remove(file, ec);
}

Error mismatch(const std::string& what, const std::string& expected, const std::string& got,
               std::string detail = {}) {
  return Error::failed(cat("sha256 mismatch for ", what, ": expected ", expected, ", got ", got),
                       std::move(detail));
}

Expected<void> write_all(int fd, std::string_view data, const fs::path& to) {
  while (!data.empty()) {
    ssize_t w = ::write(fd, data.data(), data.size());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return Error::failed(cat("cannot write ", to.string(), ": ", std::strerror(errno)));
    data.remove_prefix(static_cast<std::size_t>(w));
  }
  return {};
}

// Kernel pseudo-file systems: their "regular files" (/proc/kmsg, /sys/kernel/…) are endless,
// block, or change as they are read.
bool pseudo_file_system(int fd) {
  struct statfs st {};
  if (::fstatfs(fd, &st) != 0) return false;
  switch (static_cast<unsigned long>(st.f_type)) {
    case PROC_SUPER_MAGIC:
    case SYSFS_MAGIC:
    case DEBUGFS_MAGIC:
    case TRACEFS_MAGIC:
    case SECURITYFS_MAGIC:
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC:
    case BPF_FS_MAGIC:
    case EFIVARFS_MAGIC:
    case 0x62656570:  // configfs
      return true;
    default:
      return false;
  }
}

// `from` opened for import_file: a regular file on a real file system, without blocking.
Expected<UniqueFd> open_local(const fs::path& from) {
  UniqueFd fd(::open(from.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0)
    return Error::failed(cat("cannot read ", from.string(), ": ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Error::failed(cat("cannot read ", from.string(), ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return Error::failed(cat("cannot read ", from.string(), ": not a file"));
  if (pseudo_file_system(fd.get()))
    return Error::failed(
        cat("cannot read ", from.string(),
            ": it is on a kernel pseudo-file system (/proc, /sys, …), not a file"));
  return fd;
}

// Copies `from` to `to` (replacing it), returning the sha256 of the bytes copied. At most
// `limit` bytes; every chunk yields to an interrupt.
Expected<std::string> copy_hashing(const fs::path& from, const fs::path& to, std::uint64_t limit) {
  KILN_TRY(UniqueFd in, open_local(from));
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (out.get() < 0)
    return Error::failed(cat("cannot create ", to.string(), ": ", std::strerror(errno)));
  Sha256 hash;
  std::string buffer(1 << 20, '\0');
  std::uint64_t copied = 0;
  while (true) {
    if (interrupted()) return Error::interrupted();
    ssize_t n = ::read(in.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
      return Error::failed(cat("cannot read ", from.string(), ": it would block (not a file)"));
    if (n < 0) return Error::failed(cat("cannot read ", from.string(), ": ", std::strerror(errno)));
    if (n == 0) break;
    copied += static_cast<std::uint64_t>(n);
    if (copied > limit)
      return Error::failed(cat("cannot read ", from.string(), ": it is larger than the limit of ",
                               limit, " bytes (KILN_MAX_DOWNLOAD)"));
    hash.update(buffer.data(), static_cast<std::size_t>(n));
    KILN_CHECK(
        write_all(out.get(), std::string_view(buffer.data(), static_cast<std::size_t>(n)), to));
  }
  return hash.hex_digest();
}

}  // namespace

Downloader::Downloader(HttpClient& http, const cache::Store& store, bool offline)
    : http_(http),
      store_(store),
      offline_(offline),
      sleep_([](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); }) {}

std::optional<fs::path> Downloader::find_cached(const std::string& sha256,
                                                const std::string& filename) const {
  return store_.downloaded(sha256, filename);
}

// What to do about it, for every --offline miss.
constexpr const char* kOfflineNextStep =
    "; fetch it first where the network is reachable (`kiln fetch` with the same packages and "
    "--target, into this cache), then build --offline";

Error Downloader::offline_error(const std::string& filename, const std::string& sha256) const {
  return Error::failed(
      cat(filename.empty() ? std::string("the file") : filename, " (sha256 ", sha256,
          ") is not in the download cache and --offline forbids downloading it", kOfflineNextStep));
}

void Downloader::wait_before(int attempt) {
  if (policy_.backoff.empty()) return;
  std::size_t i = std::min(static_cast<std::size_t>(attempt - 2), policy_.backoff.size() - 1);
  sleep_(policy_.backoff[i]);
}

Expected<CachedFile> Downloader::fetch(const std::string& url, const std::string& filename,
                                       const std::string& sha256, std::optional<std::uint64_t> size,
                                       UrlFrom from) {
  KILN_CHECK(check_pin(filename, sha256));
  if (auto cached = store_.downloaded(sha256, filename)) return CachedFile{*cached, false};
  if (is_file_url(url) && from == UrlFrom::User) {
    std::string local = file_url_path(url);
    if (local.empty())
      return Error::bad_input(cat("cannot fetch ", filename, " from '", redact_url(url),
                                  "': only local file:// URLs are supported"));
    return import_file(local, filename, sha256);
  }
  if (offline_) return offline_error(filename, sha256);
  if (!is_http_url(url))
    return Error::bad_input(cat("cannot download ", filename, " from '", redact_url(url), "': ",
                                from == UrlFrom::User
                                    ? "expected an http://, https:// or file:// URL"
                                    : "expected an http:// or https:// URL"));
  KILN_TRY(cache::DownloadSlot slot, store_.download_slot(sha256, filename));
  if (slot.complete()) return CachedFile{slot.file(), false};  // another process downloaded it
  auto result =
      download_locked(url, filename, sha256,
                      {slot.partial(), slot.file(), [&slot] { return slot.publish(); }}, size);
  if (!result) slot.abandon();
  return result;
}

// One attempt's GET, its progress shown (the display cleared after it, for what comes next).
HttpResponse Downloader::transfer(const std::string& url, const std::string& filename,
                                  const fs::path& part, std::uint64_t offset, std::uint64_t limit,
                                  std::optional<std::uint64_t> size) {
  if (!progress_) return http_.download(url, part, offset, limit);
  progress_->start(filename, size.value_or(0), offset);
  DownloadProgress* shown = progress_.get();
  http_.set_progress(
      [shown](std::uint64_t received, std::uint64_t total) { shown->update(received, total); });
  HttpResponse r = http_.download(url, part, offset, limit);
  http_.set_progress({});
  progress_->clear();
  return r;
}

Expected<CachedFile> Downloader::download_locked(const std::string& url,
                                                 const std::string& filename,
                                                 const std::string& sha256, const Destination& to,
                                                 std::optional<std::uint64_t> size) {
  const fs::path& part = to.partial;
  // A stated size (the index's, which a stranger may write) narrows the limit, never widens it.
  if (size && *size > max_bytes_)
    return Error::failed(cat("cannot download ", filename, " from ", redact_url(url),
                             ": its stated size of ", *size,
                             " bytes is above the download limit "
                             "of ",
                             max_bytes_, " bytes (KILN_MAX_DOWNLOAD raises it)"));
  const std::uint64_t limit = size.value_or(max_bytes_);
  const std::string limit_text =
      size ? cat("its stated size of ", *size, " bytes")
           : cat("the download limit of ", max_bytes_, " bytes (KILN_MAX_DOWNLOAD)");
  std::error_code ec;
  if (size_or_zero(part) > limit) fs::remove(part, ec);  // a leftover no answer could complete
  const int attempts = std::max(1, policy_.attempts);
  std::string shown = redact_url(url);
  std::string last;
  bool restarted = false;  // a resumed transfer that failed verification gets one fresh start
  int attempt = 0;
  bool wait = false;
  log::info(cat("downloading ", filename, " from ", shown));
  while (attempt < attempts) {
    if (wait) {
      log::warn(cat("downloading ", filename, " failed (", last, "); retrying (attempt ",
                    attempt + 1, " of ", attempts, ")"));
      wait_before(attempt + 1);
    }
    wait = true;
    ++attempt;
    std::uint64_t offset = size_or_zero(part);
    if (offset > 0) log::verbose(cat("resuming ", filename, " at byte ", offset));
    if (interrupted()) return Error::interrupted();
    HttpResponse r = transfer(url, filename, part, offset, limit, size);
    bytes_ += r.bytes;
    if (r.transport == Transport::Interrupted || interrupted()) return Error::interrupted();
    if (r.transport == Transport::TooLarge) {
      fs::remove(part, ec);
      return Error::failed(
          cat("cannot download ", filename, " from ", shown, ": it is larger than ", limit_text));
    }
    bool resumed =
        offset > 0 && r.transport == Transport::Ok && (r.status == 206 || r.status == 416);
    if (r.ok() || (resumed && r.status == 416)) {
      KILN_TRY(std::string got, sha256_file(part));
      if (got == sha256 || sha256.empty()) {  // empty: unpinned, any bytes
        KILN_CHECK(to.publish());
        if (progress_) progress_->done(size_or_zero(to.file));
        ++downloads_;
        return CachedFile{to.file, true};
      }
      fs::remove(part, ec);
      if (resumed && !restarted) {
        // The partial file may belong to other bytes (the server's file changed): start over.
        restarted = true;
        log::warn(
            cat("the resumed download of ", filename, " does not match its sha256; starting over"));
        --attempt;
        wait = false;
        continue;
      }
      return mismatch(filename, sha256, got, cat("downloaded from ", shown));
    }
    last = r.describe();
    remove_if_empty_file(part);
    if (r.transport == Transport::Failed)
      fs::remove(part, ec);  // e.g. disk full: nothing to resume
    if (!r.retryable()) break;
  }
  std::string detail;
  if (size_or_zero(part) > 0 && !sha256.empty())
    detail = cat("the partial download ", part.string(), " is kept; the next attempt resumes it");
  return Error::failed(cat("cannot download ", filename, " from ", shown, ": ", last,
                           attempt > 1 ? cat(" (", attempt, " attempts)") : std::string()),
                       detail);
}

Expected<CachedFile> Downloader::import_file(const fs::path& file, const std::string& filename,
                                             const std::string& sha256) {
  KILN_CHECK(check_pin(filename, sha256));
  if (auto cached = store_.downloaded(sha256, filename)) return CachedFile{*cached, false};
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    return Error::failed(cat("cannot read ", file.string(), ": ",
                             fs::exists(file, ec) ? "not a file" : "no such file"));
  KILN_TRY(cache::DownloadSlot slot, store_.download_slot(sha256, filename));
  if (slot.complete()) return CachedFile{slot.file(), false};
  const fs::path part = slot.partial();
  auto got = copy_hashing(file, part, max_bytes_);
  if (!got || *got != sha256) {
    fs::remove(part, ec);
    slot.abandon();
    if (!got) return std::move(got).error();
    // No hash of a local file in the message: a manifest could name any file kiln can read
    // (file:///etc/shadow) and learn its hash from the error.
    return Error::failed(cat("sha256 mismatch for ", file.string(),
                             ": its content does not match the pinned ", sha256),
                         "kiln names the sha256 only of bytes it downloaded; for a local file of "
                         "your own, run sha256sum on it");
  }
  auto published = slot.publish();
  if (!published) {
    fs::remove(part, ec);
    slot.abandon();
    return std::move(published).error();
  }
  return CachedFile{slot.file(), false};
}

Expected<Downloader::Unpinned> Downloader::fetch_unpinned(const std::string& url,
                                                          const std::string& filename,
                                                          std::optional<std::uint64_t> size) {
  if (offline_)
    return Error::bad_input(
        cat("--offline: ", filename, " has no sha256 to find it in the cache by"));
  if (!is_http_url(url))
    return Error::bad_input(cat("cannot download ", filename, " from '", redact_url(url),
                                "': expected an http:// or https:// URL"));
  if (!is_safe_filename(filename))
    return Error::bad_input(
        cat("'", printable_excerpt(filename, 80), "' is not a plain file name"));
  KILN_TRY(cache::Staging staging, store_.staging("unpinned-"));
  const fs::path file = staging.path() / filename;
  KILN_TRY(CachedFile got,
           download_locked(url, filename, "", {file, file, [] { return Expected<void>{}; }}, size));
  KILN_TRY(std::string sha256, sha256_file(got.path));
  KILN_TRY(CachedFile cached, import_file(got.path, filename, sha256));
  return Unpinned{{cached.path, true}, sha256};
}

Expected<Downloader::Unpinned> Downloader::import_unpinned(const fs::path& file,
                                                           const std::string& filename) {
  KILN_TRY(cache::Staging staging, store_.staging("unpinned-"));
  const fs::path copy = staging.path() / "file";
  KILN_TRY(std::string sha256, copy_hashing(file, copy, max_bytes_));
  KILN_TRY(CachedFile cached, import_file(copy, filename, sha256));
  return Unpinned{cached, sha256};
}

Expected<HttpResponse> Downloader::get_text(const std::string& url,
                                            const Headers& request_headers) {
  std::string shown = redact_url(url);
  if (offline_) return Error::failed(cat("--offline forbids reading ", shown));
  if (!is_http_url(url))
    return Error::bad_input(cat("cannot read '", shown, "': expected an http:// or https:// URL"));
  const int attempts = std::max(1, policy_.attempts);
  std::string last;
  int attempt = 0;
  while (attempt < attempts) {
    if (attempt > 0) {
      log::warn(cat("reading ", shown, " failed (", last, "); retrying (attempt ", attempt + 1,
                    " of ", attempts, ")"));
      wait_before(attempt + 1);
    }
    ++attempt;
    if (interrupted()) return Error::interrupted();
    HttpResponse r = http_.get(url, request_headers);
    if (r.transport == Transport::Interrupted) return Error::interrupted();
    if (r.transport == Transport::Ok && !r.retryable()) return r;
    last = r.describe();
    if (!r.retryable()) break;
  }
  return Error::failed(cat("cannot read ", shown, ": ", last,
                           attempt > 1 ? cat(" (", attempt, " attempts)") : std::string()));
}

}  // namespace kiln::fetch
