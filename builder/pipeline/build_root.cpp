#include "pipeline/build_root.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::pipeline {

namespace fs = std::filesystem;

namespace {

constexpr std::size_t kNameLength = 20;

// "" when `path` is a real directory (not a link) of this user that nobody else may write to;
// else why not.
std::string not_private(const fs::path& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::strerror(errno);
  if (S_ISLNK(st.st_mode)) return "it is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid()) return cat("it belongs to uid ", st.st_uid, ", not to this user (uid ", ::geteuid(), ")");
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return "others may write to it";
  return "";
}

Expected<void> ensure_private_base(const fs::path& base) {
  if (::mkdir(base.c_str(), 0755) != 0 && errno != EEXIST)
    return Error::failed(cat("cannot create ", base.string(), ": ", std::strerror(errno)));
  if (std::string why = not_private(base); !why.empty())
    return Error::failed(cat("kiln will not build in ", base.string(), ": ", why,
                             " (another user may have planted it; remove it and build again)"));
  return {};
}

bool is_root_name(const std::string& name) {
  return name.size() == kNameLength && is_hex(name) && lower(name) == name;
}

}  // namespace

fs::path build_root_base() { return "/tmp/kiln-build"; }

Expected<BuildRoot> BuildRoot::create(const cache::Store& store, const std::string& source_key, bool keep) {
  const fs::path base = build_root_base();
  const std::string name = source_key.substr(0, kNameLength);
  KILN_CHECK(ensure_private_base(base));
  KILN_TRY(FileLock lock, FileLock::acquire(base / (name + ".lock")));
  const fs::path path = base / name;
  const fs::path record = store.build_roots() / name;
  KILN_CHECK(write_file_atomic(record, path.string() + "\n"));
  std::error_code ec;
  fs::remove_all(path, ec);  // what a killed build left (remove_all never follows a link)
  if (ec) return Error::failed(cat("cannot empty ", path.string(), ": ", ec.message()));
  if (::mkdir(path.c_str(), 0755) != 0)
    return Error::failed(cat("cannot create ", path.string(), ": ", std::strerror(errno)));
  return BuildRoot(path, record, std::move(lock), keep);
}

BuildRoot::~BuildRoot() {
  if (path_.empty()) return;  // moved from
  std::error_code ec;
  if (keep_) {
    log::info(cat("kept the build root ", path_.string()));
    return;
  }
  fs::remove_all(path_, ec);
  if (!ec) fs::remove(record_, ec);
}

std::uint64_t remove_abandoned_build_roots(const cache::Store& store) {
  const fs::path base = build_root_base();
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(store.build_roots(), ec))
    if (is_root_name(entry.path().filename().string())) names.push_back(entry.path().filename().string());
  auto forget = [&](const std::string& name) { fs::remove(store.build_roots() / name, ec); };
  auto missing = [](const fs::path& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) != 0 && errno == ENOENT;
  };
  if (names.empty()) return 0;
  if (missing(base)) {
    for (const auto& name : names) forget(name);
    return 0;
  }
  if (std::string why = not_private(base); !why.empty()) {
    log::warn(cat("left ", base.string(), " alone: ", why));
    return 0;
  }
  std::uint64_t removed = 0;
  for (const auto& name : names) {
    const fs::path root = base / name, lock_file = base / (name + ".lock");
    // The lock file stays: removing a lock file others may have opened would split the lock.
    auto lock = FileLock::try_acquire(lock_file);
    if (!lock) {  // a build (or the compilers of a killed one) holds it, or it is gone
      if (missing(lock_file) && missing(root)) forget(name);
      continue;
    }
    if (missing(root)) {
      forget(name);
    } else if (std::string why = not_private(root); !why.empty()) {
      log::warn(cat("left ", root.string(), " alone: ", why));
    } else if (fs::remove_all(root, ec); !ec) {
      ++removed;
      forget(name);
    }
  }
  return removed;
}

}  // namespace kiln::pipeline
