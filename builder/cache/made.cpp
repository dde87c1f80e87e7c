#include "cache/made.h"

#include <sys/stat.h>

#include <utility>
#include <vector>

#include "cache/names.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/lock.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

MadeOnce wheel_toolkit(std::string_view version, std::string_view pins_sha256) {
  return {"toolkits", cat("cuda-", version, "-", pins_sha256.substr(0, 16)), kToolkitMarker,
          cat("the CUDA ", version, " toolkit from NVIDIA's wheels")};
}

MadeOnce debian_toolkit(std::string_view release, std::string_view pins_sha256) {
  return {"toolkits", cat("cuda-", release, "-debian-", pins_sha256.substr(0, 16)), kToolkitMarker,
          cat("the CUDA ", release, " toolkit from Debian's packages")};
}

MadeOnce torch_sysroot(std::string_view wheel_sha256) {
  return {"sysroots", cat("torch-", wheel_sha256.substr(0, 16)), "torch/version.py",
          "torch's headers and libraries from its wheel"};
}

MadeOnce setuptools_env(std::string_view identity_sha256) {
  return {"envs", cat("setuptools-", identity_sha256.substr(0, 16)), "kiln-env.json",
          "the setuptools build environment"};
}

namespace {

// Whether `dir`'s marker is there (a plain file, `dir` a directory, neither reached by a link).
bool whole(const fs::path& dir, const std::string& marker) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  fs::path at = dir;
  for (const auto& part : fs::path(marker)) {
    at /= part;
    if (::lstat(at.c_str(), &st) != 0) return false;
  }
  return S_ISREG(st.st_mode);
}

Expected<void> check_names(const MadeOnce& what) {
  if (is_plain_name(what.folder) && is_plain_name(what.name) && what.name[0] != '.' &&
      !what.marker.empty())
    return {};
  return Error::bad_input(cat("cannot keep '", printable_excerpt(what.name, 80),
                              "' in the cache's ", what.folder, "/: not a plain name"));
}

// Runs `make` in a staging directory beside `dest` and renames its result into place.
Expected<void> make_in_staging(const fs::path& dest, const MadeOnce& what, const Maker& make) {
  KILN_TRY(TempDir staging,
           TempDir::create(dest.parent_path(), cat(".", dest.filename().string(), ".tmp-")));
  const fs::path dir = staging.path() / "made";
  const fs::path scratch = staging.path() / "scratch";
  KILN_CHECK(ensure_directory(scratch));
  KILN_CHECK(make(dir, scratch));
  if (!whole(dir, what.marker))
    return Error::failed(cat("making ", what.what, " left no ", what.marker));
  std::error_code ec;
  fs::rename(dir, dest, ec);
  if (ec)
    return Error::failed(cat("cannot move ", what.what, " to ", dest.string(), ": ", ec.message()));
  return fsync_directory(dest.parent_path());
}

// The lock of a made-once input: beside it, in its own folder, so that caches sharing that folder
// (a symlinked sysroots/, as the tests' caches and a team's scratch caches do) share its lock.
fs::path made_lock(const fs::path& folder, std::string_view name) {
  return folder / cat(name, ".lock");
}

}  // namespace

std::optional<fs::path> Store::find_made(const MadeOnce& what) const {
  if (!check_names(what)) return std::nullopt;
  fs::path dir = root_ / what.folder / what.name;
  if (!whole(dir, what.marker)) return std::nullopt;
  return dir;
}

Expected<fs::path> Store::ensure(const MadeOnce& what, const Maker& make) const {
  KILN_CHECK(check_names(what));
  const fs::path dest = root_ / what.folder / what.name;
  if (whole(dest, what.marker)) return dest;  // complete ones appear by rename: whole
  (void)mark();
  KILN_CHECK(ensure_directory(dest.parent_path()));
  KILN_TRY(FileLock lock, FileLock::acquire(made_lock(dest.parent_path(), what.name)));
  if (whole(dest, what.marker)) return dest;  // another kiln made it meanwhile
  remove_stale_staging(dest);  // what a process that died while holding this lock left
  log::info(cat("making ", what.what, " in ", dest.string(), " (once)"));
  KILN_CHECK(make_in_staging(dest, what, make));
  return dest;
}

GcResult Store::gc_made() const {
  GcResult removed;
  for (const char* folder : {"toolkits", "sysroots", "envs"}) {
    std::error_code ec;
    std::vector<std::pair<fs::path, std::string>> staged;  // (a staging directory, what it makes)
    for (const auto& e : fs::directory_iterator(root_ / folder, ec)) {
      std::string name = e.path().filename().string();
      auto at = name.find(".tmp-");
      if (name.starts_with('.') && at != std::string::npos && at > 1)
        staged.emplace_back(e.path(), name.substr(1, at - 1));
    }
    for (const auto& [path, made] : staged) {
      auto lock = FileLock::try_acquire(made_lock(root_ / folder, made), /*create=*/true);
      if (!lock) continue;  // being made now
      std::uint64_t bytes = tree_bytes(path);
      if (fs::remove_all(path, ec) > 0 && !ec) ++removed.items, removed.bytes += bytes;
    }
  }
  return removed;
}

}  // namespace kiln::cache
