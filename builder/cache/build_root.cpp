#include "cache/build_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "cache/store.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/namespace.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kNameLength = 20;

bool is_root_name(const std::string& name) {
  return name.size() == kNameLength && is_hex(name) && lower(name) == name;
}

// Beside the key locks: <cache>/locks/build-<name>.lock.
std::string lock_name(const std::string& name) {
  return cat("build-", name);
}

// Where this process's build roots are: /tmp/kiln-build in kiln's namespace (entered for the first
// cache that builds), else the cache's own build directory, with the caveat that says why.
struct BuildRoots {
  fs::path base;
  std::string caveat;
};
Expected<BuildRoots> build_roots(const fs::path& dir) {
  static std::mutex mutex;
  static fs::path entered_for;  // the build directory /tmp/kiln-build shows
  static std::string why_not;   // why there is no namespace
  std::lock_guard lock(mutex);
  KILN_CHECK(ensure_directory(dir));  // before the namespace: a new cache under /tmp stays real
  if (entered_for.empty()) {
    if (auto entered = enter_private_tmp(fs::path(kBuildRootsPath).filename(), dir); entered) {
      entered_for = dir;
    } else {
      entered_for = "-";
      why_not = entered.error().message;
      log::warn(cat("builds run at their cache's own path here, not at ", kBuildRootsPath, " (",
                    why_not, "): the wheels embed ", dir.string(),
                    " and differ from wheels built elsewhere"));
    }
  }
  if (entered_for == dir) return BuildRoots{kBuildRootsPath, ""};
  return BuildRoots{dir,
                    cat("built at ", dir.string(), ", not at ", kBuildRootsPath, " (",
                        entered_for == "-" ? why_not : "this process shows another cache's there",
                        "): the wheel embeds that path")};
}

}  // namespace

Expected<BuildRoot> BuildRoot::create(const Store& store, const std::string& root_key, bool keep) {
  const fs::path dir = absolute_path(store.build_roots());
  KILN_TRY(BuildRoots roots, build_roots(dir));
  const std::string name = root_key.substr(0, kNameLength);
  KILN_TRY(FileLock lock, FileLock::acquire(store.lock_path(lock_name(name))));
  const fs::path path = roots.base / name;
  std::error_code ec;
  fs::remove_all(path, ec);  // what a killed build left (remove_all never follows a link)
  if (ec) return Error::failed(cat("cannot empty ", path.string(), ": ", ec.message()));
  if (::mkdir(path.c_str(), 0755) != 0)
    return Error::failed(cat("cannot create ", path.string(), ": ", std::strerror(errno)));
  BuildRoot root(path, dir / name, std::move(lock), keep);
  root.caveat_ = std::move(roots.caveat);
  return root;
}

BuildRoot::~BuildRoot() {
  if (path_.empty()) return;  // moved from
  if (keep_) {
    log::info(cat("kept the build root ", real_.string()));
    return;
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
}

GcResult Store::gc_build_roots() const {
  const fs::path dir = build_roots();
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    struct stat st;
    if (is_root_name(name) && ::lstat(entry.path().c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      names.push_back(name);
  }
  GcResult removed;
  for (const auto& name : names) {
    // The lock file stays: removing a lock file others may have opened would split the lock.
    auto lock = FileLock::try_acquire(lock_path(lock_name(name)), /*create=*/true);
    if (!lock) continue;  // a build (or the compilers of a killed one) holds it
    std::uint64_t bytes = tree_bytes(dir / name);
    if (fs::remove_all(dir / name, ec); !ec) ++removed.items, removed.bytes += bytes;
  }
  return removed;
}

}  // namespace kiln::cache
