#include "index/export.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "cache/entry.h"
#include "core/fs.h"
#include "core/strings.h"
#include "index/scan.h"

namespace kiln::index {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".kiln-index";

Expected<void> make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Error::failed(cat("cannot create ", dir.string(), ": ", std::strerror(errno)));
  return {};
}

// A copy of the wheel behind `fd` (already checked by open_wheel), fsynced.
Expected<void> copy_fd(int in, const fs::path& to) {
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out < 0) return Error::failed(cat("cannot create ", to.string(), ": ", std::strerror(errno)));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(out);
      return Error::failed(
          cat("cannot read the wheel for ", to.string(), ": ", std::strerror(errno)));
    }
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(out, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        ::close(out);
        return Error::failed(cat("cannot write ", to.string(), ": ", std::strerror(errno)));
      }
      done += w;
    }
  }
  bool ok = ::fsync(out) == 0;
  ok = ::close(out) == 0 && ok;
  if (!ok) return Error::failed(cat("cannot write ", to.string(), ": ", std::strerror(errno)));
  return {};
}

Expected<void> check_destination(const fs::path& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode))
    return Error::bad_input(
        cat(dir.string(), " exists and is not a directory; refusing to replace it"));
  std::error_code ec;
  if (fs::is_empty(dir, ec) || fs::exists(dir / kMarker, ec)) return {};
  return Error::bad_input(cat(dir.string(), " exists and is not a kiln index export (no ", kMarker,
                              "); refusing to replace it"));
}

Expected<void> write_page(const fs::path& dir, const Page& page) {
  KILN_CHECK(make_dir(dir));
  KILN_CHECK(write_file_atomic(dir / "index.html", page.html));
  return write_file_atomic(dir / "index.json", page.json);
}

// An empty page for each of kiln's names this target has no files for: a static index cannot
// redirect, but a client that searches indexes in order (uv's first-index) stops at kiln's.
Expected<void> write_own_pages(const Target& t, const std::set<std::string, std::less<>>& own,
                               const fs::path& simple, ExportResult& result) {
  for (const auto& name : own) {
    if (t.projects.contains(name)) continue;
    KILN_CHECK(write_page(simple / name, empty_project(name).page));
    ++result.empty;
  }
  return {};
}

}  // namespace

Expected<ExportResult> export_index(const IndexModel& model, const fs::path& dir_in,
                                    const ExportOptions& options) {
  fs::path dir = absolute_path(dir_in).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();
  KILN_CHECK(check_destination(dir));
  KILN_CHECK(ensure_directory(dir.parent_path()));
  KILN_TRY(TempDir temp,
           TempDir::create(dir.parent_path(), cat(".", dir.filename().string(), ".export-")));
  ::chmod(temp.path().c_str(), 0755);
  const fs::path& root = temp.path();

  ExportResult result;
  std::set<std::string, std::less<>> own = options.own;
  for (const auto& [tname, t] : model.targets)
    for (const auto& [pname, p] : t.projects) own.insert(pname);
  KILN_CHECK(write_file_atomic(root / "index.html", model.root_html));
  nlohmann::json marker = {{"generator", "kiln"}, {"targets", nlohmann::json::array()}};
  for (const auto& [tname, t] : model.targets) {
    ++result.targets;
    marker["targets"].push_back(tname);
    fs::path tdir = root / tname;
    KILN_CHECK(make_dir(tdir));
    KILN_CHECK(make_dir(tdir / "simple"));
    KILN_CHECK(write_file_atomic(tdir / "simple" / "index.html", t.page.html));
    KILN_CHECK(write_file_atomic(tdir / "simple" / "index.json", t.page.json));
    KILN_CHECK(write_own_pages(t, own, tdir / "simple", result));
    for (const auto& [pname, p] : t.projects) {
      ++result.projects;
      fs::path pdir = tdir / "simple" / pname;
      KILN_CHECK(write_page(pdir, p.page));
      for (const auto& f : p.files) {
        ++result.files;
        KILN_TRY(int fd, open_wheel(f.dir, f.filename, f.size));
        fs::path to = pdir / f.filename;
        bool linked = false;
        if (!options.copy) {
          // linkat on the open descriptor: the very file open_wheel checked, never a symlink.
          std::string proc = cat("/proc/self/fd/", fd);
          linked = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, to.c_str(), AT_SYMLINK_FOLLOW) == 0;
        }
        Expected<void> copied = linked ? Expected<void>() : copy_fd(fd, to);
        ::close(fd);
        KILN_CHECK(copied);
        ++(linked ? result.linked : result.copied);
        KILN_CHECK(write_file_atomic(pdir / cat(f.filename, ".metadata"), f.metadata));
        if (!f.attestation.empty())
          KILN_CHECK(
              write_file_atomic(pdir / cache::attestation_file_name(f.filename), f.attestation));
      }
      KILN_CHECK(fsync_directory(pdir));
    }
  }
  KILN_CHECK(write_file_atomic(root / kMarker, marker.dump(2) + "\n"));

  struct stat st {};
  if (::lstat(dir.c_str(), &st) == 0) {
    // Swap the finished tree with the old one in one step, then remove the old one.
    if (::renameat2(AT_FDCWD, root.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0)
      return Error::failed(cat("cannot replace ", dir.string(), ": ", std::strerror(errno)));
  } else if (::rename(root.c_str(), dir.c_str()) != 0) {
    return Error::failed(cat("cannot create ", dir.string(), ": ", std::strerror(errno)));
  }
  // temp now names the old export (or nothing): its destructor removes it.
  KILN_CHECK(fsync_directory(dir.parent_path()));
  return result;
}

}  // namespace kiln::index
