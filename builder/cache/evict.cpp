// Store::evict: `kiln cache gc --max-age/--max-size`, least recently used first.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <tuple>

#include "cache/names.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

// A wheel entry or an object, as the scan found it.
struct Candidate {
  bool wheel = false;
  std::string key;    // a wheel entry's key
  std::string name;   // "wheels/<key>" or "objects/<key[0:2]>/<file>": the order of ties
  struct stat st {};  // a wheel entry: its entry.json's (else its own); an object: the file's
  std::uint64_t bytes = 0;
  bool gone = false;  // removed by this evict
  bool kept = false;  // held by a build, used meanwhile, or not removable: never tried again
};

bool older(const Candidate& a, const Candidate& b) {
  return std::tie(a.st.st_mtim.tv_sec, a.st.st_mtim.tv_nsec, a.name) <
         std::tie(b.st.st_mtim.tv_sec, b.st.st_mtim.tv_nsec, b.name);
}

bool same_use(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// The wheel entry at `dir` (lstat'ed, never followed): its last use is its entry.json's mtime, else
// (an entry without one, or something else where an entry belongs) its own.
std::optional<Candidate> wheel_candidate(const fs::path& dir, const std::string& key) {
  Candidate c;
  c.wheel = true;
  c.key = key;
  c.name = cat("wheels/", key);
  if (::lstat(dir.c_str(), &c.st) != 0) return std::nullopt;
  if (S_ISDIR(c.st.st_mode)) {
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    struct stat json {};
    if (fd.get() >= 0 && ::fstatat(fd.get(), "entry.json", &json, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISREG(json.st_mode))
      c.st = json;
  }
  c.bytes = tree_bytes(dir);
  return c;
}

// Every wheel entry (named by a build key) and every object file, oldest first.
std::vector<Candidate> scan(const Store& store) {
  std::vector<Candidate> out;
  for (const auto& key : store.keys()) {
    if (!is_sha256_hex(key)) continue;  // no entry of kiln's: left alone
    if (auto c = wheel_candidate(StoreInternals::wheels(store) / key, key))
      out.push_back(std::move(*c));
  }
  for (const auto& rel : store.object_files()) {
    Candidate c;
    c.name = rel;
    // A link or another kind of file is no entry: gc's first pass removes what it can of those.
    if (::lstat((store.root() / rel).c_str(), &c.st) != 0 || !S_ISREG(c.st.st_mode)) continue;
    c.bytes = static_cast<std::uint64_t>(c.st.st_size);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), older);
  return out;
}

// The wheel name of an entry for a message, else its key's first 16 digits.
std::string entry_label(const Store& store, const std::string& key) {
  EntryRead read = store.read_entry(key);
  return read ? read.entry.wheel.filename().string() : cat("entry ", key.substr(0, 16));
}

// Removes one wheel entry unless a build holds its key or used it since the scan.
bool remove_wheel(const Store& store, Candidate& c, EvictResult& result) {
  const fs::path lock_file = StoreInternals::lock_path(store, c.key);
  (void)ensure_directory(lock_file.parent_path());
  auto lock = FileLock::try_acquire(lock_file, /*create=*/true);
  if (!lock) {  // never delete what a build holds
    log::info(cat("kept ", entry_label(store, c.key), ": a build holds its key (",
                  c.key.substr(0, 16), ")"));
    result.kept_locked.push_back(c.key);
    return false;
  }
  auto now = wheel_candidate(StoreInternals::wheels(store) / c.key, c.key);
  if (!now) {  // removed by another process meanwhile
    c.gone = true;
    return false;
  }
  if (!same_use(now->st, c.st)) return false;  // a build took it since the scan
  auto removed = store.remove(c.key);
  if (!removed) {
    log::warn(removed.error().message);
    return false;
  }
  c.gone = true;
  ++result.removed_wheels;
  return true;
}

// Unlinks one object (never what a link names) unless it was used or replaced since the scan.
bool remove_object(const Store& store, Candidate& c, EvictResult& result) {
  const fs::path path = store.root() / c.name;
  struct stat now {};
  if (::lstat(path.c_str(), &now) != 0) {
    c.gone = true;
    return false;
  }
  if (!same_use(now, c.st) || !S_ISREG(now.st_mode)) return false;
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) c.gone = true;
    return false;
  }
  c.gone = true;
  ++result.removed_objects;
  return true;
}

bool evict_one(const Store& store, Candidate& c, EvictResult& result) {
  bool removed = c.wheel ? remove_wheel(store, c, result) : remove_object(store, c, result);
  if (removed) {
    log::verbose(cat("evicted ", c.name));
    result.freed_bytes += c.bytes;
  } else if (!c.gone) {
    c.kept = true;
  }
  return removed;
}

}  // namespace

Expected<EvictResult> Store::evict(const EvictPolicy& policy, std::time_t now) const {
  KILN_CHECK(recognise());
  EvictResult result;
  std::vector<Candidate> all = scan(*this);
  if (policy.max_age) {
    // Last used more than max_age seconds ago (an mtime in the future is not old).
    const std::int64_t cutoff = static_cast<std::int64_t>(now) - *policy.max_age;
    for (auto& c : all)
      if (static_cast<std::int64_t>(c.st.st_mtim.tv_sec) < cutoff) evict_one(*this, c, result);
  }
  std::uint64_t total = 0;
  for (const auto& c : all)
    if (!c.gone) total += c.bytes;
  if (policy.max_bytes)
    for (auto& c : all) {  // oldest first
      if (total <= *policy.max_bytes) break;
      if (c.gone || c.kept) continue;
      if (evict_one(*this, c, result) || c.gone) total -= c.bytes;
    }
  result.remaining_bytes = total;
  return result;
}

std::uint64_t Store::other_bytes() const {
  std::uint64_t total = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root_, ec)) {
    const std::string name = d.path().filename().string();
    if (name == "wheels" || name == "objects" || name == "CACHEDIR.TAG") continue;
    total += tree_bytes(d.path());
  }
  return total;
}

}  // namespace kiln::cache
