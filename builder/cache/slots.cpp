#include "cache/slots.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/names.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

void remove_children(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove_all(entry.path(), ec);
}

}  // namespace

fs::path DownloadSlot::partial() const {
  fs::path part = file_;
  part += kPartialSuffix;
  return part;
}

Expected<void> DownloadSlot::publish() const {
  const fs::path part = partial();
  int fd = ::open(part.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::failed(cat("cannot open ", part.string(), ": ", std::strerror(errno)));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Error::failed(cat("cannot sync ", part.string(), ": ", std::strerror(errno)));
  if (::rename(part.c_str(), file_.c_str()) != 0)
    return Error::failed(
        cat("cannot rename ", part.string(), " to ", file_.string(), ": ", std::strerror(errno)));
  return fsync_directory(file_.parent_path());
}

bool DownloadSlot::complete() const {
  std::error_code ec;
  return fs::is_regular_file(fs::symlink_status(file_, ec));
}

void DownloadSlot::abandon() const {
  std::error_code ec;
  fs::remove(file_.parent_path(), ec);  // remove() keeps a directory that is not empty
  fs::remove(file_.parent_path().parent_path(), ec);
}

void GitMirror::empty() const {
  remove_children(path_);
}

void GitMirror::remove() const {
  remove_children(path_);
  std::error_code ec;
  fs::remove(path_, ec);
}

fs::path Store::download_path(std::string_view sha256, std::string_view filename) const {
  return root_ / "downloads" / sha256.substr(0, 2) / sha256 / filename;
}

Expected<DownloadSlot> Store::download_slot(std::string_view sha256,
                                            std::string_view filename) const {
  if (!is_sha256_hex(sha256) || !is_plain_name(filename))
    return Error::bad_input(cat("cannot keep '", printable_excerpt(filename, 80), "' (sha256 ",
                                printable_excerpt(sha256, 80), ") in the download cache"));
  (void)mark();
  fs::path file = download_path(sha256, filename);
  KILN_TRY(DirLock lock, DirLock::acquire(file.parent_path()));
  return DownloadSlot(std::move(lock), std::move(file));
}

std::optional<fs::path> Store::downloaded(std::string_view sha256,
                                          std::string_view filename) const {
  if (!is_sha256_hex(sha256)) return std::nullopt;
  std::error_code ec;
  if (!filename.empty()) {
    if (!is_plain_name(filename)) return std::nullopt;
    fs::path p = download_path(sha256, filename);
    if (fs::is_regular_file(p, ec)) return p;
    return std::nullopt;
  }
  std::optional<fs::path> first;  // of the names there, the least
  for (auto it = fs::directory_iterator(download_path(sha256, ""), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.' || name.ends_with(kPartialSuffix)) continue;
    if (it->is_regular_file(ec) && (!first || it->path() < *first)) first = it->path();
  }
  return first;
}

bool Store::discard_download(const fs::path& file) const {
  const fs::path dir = file.parent_path();
  const std::string sha256 = dir.filename().string();
  if (!is_sha256_hex(sha256) || download_path(sha256, file.filename().string()) != file)
    return false;
  std::error_code ec;
  return fs::remove_all(dir, ec) > 0 && !ec;
}

Expected<GitMirror> Store::git_mirror(std::string_view url) const {
  (void)mark();
  fs::path dir = root_ / "git" / sha256_hex(url);
  KILN_TRY(DirLock lock, DirLock::acquire(dir));
  return GitMirror(std::move(lock), std::move(dir));
}

}  // namespace kiln::cache
