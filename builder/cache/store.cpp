#include "cache/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <tuple>

#include "cache/names.h"
#include "cache/remote.h"
#include "core/fault.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

bool is_plain_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

namespace {

// Marks an entry file used now: its mtime is what evict() goes by (atime is not kept on noatime or
// relatime mounts). One syscall; a link is not followed, and a failure (a cache this process may
// only read) changes nothing else: a hit never fails on it.
void mark_used(int dir_fd, const char* name) {
  (void)::utimensat(dir_fd, name, nullptr, AT_SYMLINK_NOFOLLOW);
}

// An open file, or its first `max` + 1 bytes when it is larger (the caller's parser refuses that).
std::optional<std::string> read_fd(int fd, std::size_t max) {
  std::string data;
  char buf[65536];
  for (;;) {
    std::size_t want = std::min(sizeof buf, max + 1 - data.size());
    if (want == 0) return data;
    ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return data;
    data.append(buf, static_cast<std::size_t>(n));
  }
}

// The last-build record's cap: its inputs are the key's whole input document.
constexpr std::size_t kMaxLastRecordBytes = 16u << 20;

}  // namespace

std::vector<std::string> Store::keys() const {
  std::vector<std::string> keys;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(wheels(), ec)) {
    std::string key = d.path().filename().string();
    if (!key.empty() && key[0] != '.') keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Each step opens relative to the entry directory without following a symlink: a stranger's cache
// (kiln serve reads any) cannot point a read outside the entry, not even by swapping a file
// between a check and an open.
EntryRead Store::read_entry(const std::string& key) const {
  using State = EntryRead::State;
  EntryRead out;
  auto unusable = [&](std::string why) {
    out.state = State::Unusable;
    out.reason = std::move(why);
    return std::move(out);
  };
  fs::path dir = entry_dir(key);
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) return out;  // missing (or removed meanwhile)
    if (!S_ISDIR(st.st_mode)) return unusable("not a directory (symlinks are not followed)");
    out.state = State::Incomplete;  // a directory this process cannot open
    return out;
  }
  struct stat st {};
  if (::fstatat(dir_fd.get(), "entry.json", &st, AT_SYMLINK_NOFOLLOW) != 0) {
    out.state = State::Incomplete;  // not committed whole, or a hand's doing: nothing to report
    return out;
  }
  if (!S_ISREG(st.st_mode)) return unusable("entry.json is not a regular file");
  UniqueFd json_fd(
      ::openat(dir_fd.get(), "entry.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (json_fd.get() < 0) {
    out.state = State::Incomplete;  // removed meanwhile, or unreadable
    return out;
  }
  if (::fstat(json_fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return unusable("entry.json is not a regular file");
  auto text = read_fd(json_fd.get(), kMaxEntryJsonBytes);
  if (!text) {
    out.state = State::Incomplete;
    return out;
  }
  auto info = parse_entry_info(*text);
  if (!info) return unusable(info.error().message);
  if (!info->key.empty() && info->key != key)
    return unusable(cat("entry.json names another build key (", info->key.substr(0, 16), ")"));
  Entry& e = out.entry;
  e.key = key;
  e.dir = dir;
  const std::string& name = info->wheel;
  e.wheel = dir / name;
  e.sha256 = info->sha256;
  e.size = info->size;
  if (::fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
    return unusable(cat(name, " is missing or not a regular file"));
  if (static_cast<std::uint64_t>(st.st_size) != e.size)
    return unusable(cat(name, ": size ", st.st_size, " is not the recorded ", e.size));
  if (const std::string& a = info->attestation; !a.empty()) {
    if (::fstatat(dir_fd.get(), a.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
      return unusable(cat(a, " is missing or not a regular file"));
    if (static_cast<std::uint64_t>(st.st_size) > kMaxAttestationBytes)
      return unusable(cat(a, " is larger than ", kMaxAttestationBytes, " bytes"));
    e.attestation = dir / a;
  }
  e.info = std::move(*info);
  out.state = State::Usable;
  return out;
}

std::optional<Entry> Store::lookup(const std::string& key) const {
  EntryRead read = read_entry(key);
  if (!read) return std::nullopt;
  return std::move(read.entry);
}

std::optional<std::string> Store::damage(const Entry& e) const {
  std::error_code ec;
  auto size = fs::file_size(e.wheel, ec);
  if (ec) return cat(e.wheel.filename().string(), ": ", ec.message());
  if (e.size != 0 && size != e.size)
    return cat(e.wheel.filename().string(), ": ", size, " bytes instead of the recorded ", e.size);
  auto sha = sha256_file(e.wheel);
  if (!sha) return sha.error().message;
  if (*sha != e.sha256)
    return cat(e.wheel.filename().string(), ": sha256 ", *sha, " does not match the recorded ",
               e.sha256);
  return std::nullopt;
}

std::optional<Entry> Store::lookup_verified(const std::string& key, std::string& removed) const {
  removed.clear();
  EntryRead read = read_entry(key);
  std::optional<std::string> problem;
  switch (read.state) {
    case EntryRead::State::Usable:
      problem = damage(read.entry);
      break;
    case EntryRead::State::Missing:
      break;
    case EntryRead::State::Incomplete:
      problem = "the entry is incomplete";
      break;
    case EntryRead::State::Unusable:
      problem = read.reason;
      break;
  }
  if (!problem) {
    if (!read) return std::nullopt;
    UniqueFd dir_fd(
        ::open(read.entry.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (dir_fd.get() >= 0) mark_used(dir_fd.get(), "entry.json");
    return std::move(read.entry);
  }
  removed = *problem;
  auto gone = remove(key);
  if (!gone) removed += cat(" (and it could not be removed: ", gone.error().message, ")");
  return std::nullopt;
}

namespace {

constexpr std::string_view kNoObjectHeader = kNoEntryHeader;

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

// Reads an object cache entry; when it is damaged, says why in `problem` and removes it, unless it
// was replaced meanwhile (a concurrent build stored it anew). Returns the payload when it is whole.
std::optional<std::string> load_or_remove(const fs::path& path, std::string& problem,
                                          bool& removed) {
  removed = false;
  struct stat before {
  }, after{};
  if (::lstat(path.c_str(), &before) != 0) return std::nullopt;  // a miss
  if (S_ISREG(before.st_mode)) {  // (a FIFO there would block the read; a link leads elsewhere)
    auto data = read_file(path);
    if (!data) return std::nullopt;
    auto payload = entry_payload(*data);
    if (payload) return std::string(*payload);
    problem = payload.error().message;
  } else {
    problem = "not a regular file";
  }
  removed =
      ::lstat(path.c_str(), &after) == 0 && same_file(before, after) && ::unlink(path.c_str()) == 0;
  return std::nullopt;
}

}  // namespace

fs::path Store::object_path(const std::string& key, std::string_view suffix) const {
  return objects() / key.substr(0, 2) / cat(key, suffix);
}

Expected<void> Store::store_object(const std::string& key, std::string_view suffix,
                                   std::string_view bytes) const {
  KILN_CHECK(write_object(key, suffix, bytes));
  if (shared_) shared_->put(remote_object_name(key, suffix), bytes);
  return {};
}

Expected<void> Store::write_object(const std::string& key, std::string_view suffix,
                                   std::string_view bytes) const {
  if (!is_sha256_hex(key)) return Error::failed(cat("not an object key: ", key));
  (void)mark();  // what kiln writes is a kiln cache (a cache it may only read: the write says)
  fs::path path = object_path(key, suffix);
  KILN_CHECK(ensure_directory(path.parent_path()));
  return write_file_atomic(path, frame_entry(bytes));
}

std::optional<std::string> Store::load_object(const std::string& key,
                                              std::string_view suffix) const {
  if (!is_sha256_hex(key)) return std::nullopt;
  std::string problem;
  bool removed = false;
  auto bytes = load_or_remove(object_path(key, suffix), problem, removed);
  if (!problem.empty())
    log::verbose(cat("object cache: ", object_path(key, suffix).string(), ": ", problem,
                     removed ? "; removed, " : "; ", "building it again"));
  if (bytes) {
    local_stats_.hits++;
    mark_used(AT_FDCWD, object_path(key, suffix).c_str());
    return bytes;
  }
  local_stats_.misses++;
  if (!shared_) return std::nullopt;
  bytes = shared_->get(remote_object_name(key, suffix), remote_object_bound(suffix));
  if (bytes) (void)write_object(key, suffix, *bytes);  // kept locally; a failure is a later miss
  return bytes;
}

std::optional<std::string> Store::peek_object(const std::string& key,
                                              std::string_view suffix) const {
  if (!is_sha256_hex(key)) return std::nullopt;
  const fs::path path = object_path(key, suffix);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  auto data = read_file(path);
  if (!data) return std::nullopt;
  auto payload = entry_payload(*data);
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

std::optional<std::string> Store::load_shared_object(const std::string& key,
                                                     std::string_view suffix) const {
  if (!shared_ || !is_sha256_hex(key)) return std::nullopt;
  return shared_->get(remote_object_name(key, suffix), remote_object_bound(suffix));
}

namespace {}  // namespace

std::optional<Store::SharedWheel> Store::fetch_shared_wheel(const std::string& key,
                                                            const fs::path& dir) const {
  if (!shared_ || !is_sha256_hex(key)) return std::nullopt;
  auto text = shared_->get(remote_wheel_info_name(key), kMaxRemoteEntryJson);
  if (!text) return std::nullopt;
  auto refuse = [&](const std::string& why) {
    log::warn(cat("remote cache: the entry for ", key.substr(0, 16), " is refused (", why,
                  "); building it"));
    return std::nullopt;
  };
  // The same reader as a local entry's: a field of the wrong type or size is a corrupt miss.
  auto info = parse_entry_info(*text);
  if (!info) return refuse(info.error().message);
  if (!info->key.empty() && info->key != key)
    return refuse(cat("its entry.json names another build key (", info->key.substr(0, 16), ")"));
  const std::string& name = info->wheel;
  auto bytes = shared_->get(remote_wheel_name(key, name), kMaxRemoteWheel);
  if (!bytes) return std::nullopt;
  if (sha256_hex(*bytes) != info->sha256)
    return refuse(cat(name, " does not match its recorded sha256"));
  if (!write_file_atomic(dir / name, *bytes)) return std::nullopt;
  SharedWheel out{dir / name, info->sha256, {}};
  // The builder's attestation, when its entry names one (the taker checks what it says).
  if (!info->attestation.empty())
    if (auto text = shared_->get(remote_wheel_name(key, info->attestation), kMaxAttestationBytes))
      out.attestation = std::move(*text);
  return out;
}

void Store::share_entry(const Entry& entry) const {
  if (!shared_ || shared_->readonly() || !shared_->on()) return;
  auto bytes = read_file(entry.wheel);
  if (!bytes) return;
  shared_->put(remote_wheel_name(entry.key, entry.wheel.filename().string()), *bytes);
  if (auto attestation = read_attestation(entry); attestation && *attestation)
    shared_->put(remote_wheel_name(entry.key, entry.info.attestation), **attestation);
  shared_->put(remote_wheel_info_name(entry.key), entry.info.text());
}

std::vector<std::string> Store::object_files() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(objects(), ec)) {
    std::string prefix = shard.path().filename().string();
    std::error_code kind;
    if (prefix.size() != 2 || !is_hex(prefix) || !shard.is_directory(kind) ||
        shard.is_symlink(kind))
      continue;
    std::error_code inner;
    for (const auto& f : fs::directory_iterator(shard.path(), inner)) {
      std::string name = f.path().filename().string();
      if (name.starts_with(".")) continue;  // write_file_atomic's temporaries
      out.push_back(cat("objects/", prefix, "/", name));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

ObjectsVerified Store::verify_objects() const {
  ObjectsVerified out;
  for (const auto& rel : object_files()) {
    fs::path path = root_ / rel;
    std::string name = fs::path(rel).filename().string();
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;  // removed meanwhile
    ++out.checked;
    if (!S_ISREG(st.st_mode)) {
      out.damaged.push_back({rel, "not a regular file"});
      continue;
    }
    if (name.size() < 64 || !is_sha256_hex(name.substr(0, 64)) ||
        name.substr(0, 2) != fs::path(rel).parent_path().filename().string()) {
      out.damaged.push_back({rel, "not an object cache entry's name (<sha256><suffix>)"});
      continue;
    }
    auto data = read_file(path);
    if (!data) {
      out.damaged.push_back({rel, data.error().message});
      continue;
    }
    if (auto payload = entry_payload(*data); !payload) {
      if (payload.error().message == kNoObjectHeader)
        out.stale.push_back(rel);
      else
        out.damaged.push_back({rel, payload.error().message});
    }
  }
  return out;
}

Expected<Staging> Store::staging(std::string_view prefix) const {
  (void)mark();  // every wheel, download and environment is staged: the cache is kiln's
  for (int attempt = 0; attempt < 100; ++attempt) {
    KILN_TRY(TempDir dir, TempDir::create(tmp_root(), prefix));
    int fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;  // gc took it between mkdtemp and open
    while (::flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    // gc may have locked and removed it between mkdtemp and flock: then make another.
    struct stat held {
    }, now{};
    if (::fstat(fd, &held) == 0 && ::stat(dir.path().c_str(), &now) == 0 &&
        held.st_ino == now.st_ino && held.st_dev == now.st_dev)
      return Staging{FileLock::adopt(fd), std::move(dir)};
    ::close(fd);
    dir.release();
  }
  return Error::failed(
      cat("cannot create a staging directory in ", tmp_root().string(), ": it keeps disappearing"));
}

Expected<void> Store::each_kiln_wheel(const std::function<bool(const fs::path&)>& visit) const {
  const fs::path dir = kiln_wheels();
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return {};
  if (!S_ISDIR(st.st_mode))
    return Error::failed(cat(dir.string(), ": not a directory (a link is not followed)"));
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().ends_with(".whl") && !visit(it->path())) break;
  return {};
}

namespace {

DirStamp stamp(const fs::path& dir) {
  DirStamp s;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return s;
  auto ns = [](const struct timespec& t) {
    return static_cast<std::int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
  };
  return {true, ns(st.st_mtim), ns(st.st_ctim), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_nlink)};
}

}  // namespace

ServedStamp Store::served_stamp() const {
  return {stamp(wheels()), stamp(last_root()), stamp(kiln_wheels())};
}

fs::path Store::keep_logs(const std::string& key, const fs::path& from) const {
  const fs::path dest = absolute_path(root_ / "logs" / key);
  if (!is_sha256_hex(key) || !ensure_directory(dest.parent_path())) return dest;
  auto staged = TempDir::create(dest.parent_path(), cat(".", key, ".tmp-"));
  if (!staged) return dest;
  std::error_code ec;
  fs::copy(from, staged->path() / "logs",
           fs::copy_options::recursive | fs::copy_options::copy_symlinks, ec);
  if (ec) return dest;
  fs::remove_all(dest, ec);
  fs::rename(staged->path() / "logs", dest, ec);
  return dest;
}

fs::path Store::lock_path(std::string_view name) const {
  return root_ / "locks" / cat(name, ".lock");
}

fs::path Store::last_inputs(const std::string& target, const std::string& normalized_name) const {
  return root_ / "last" / target / cat(normalized_name, ".json");
}

namespace {

constexpr std::uint64_t kMaxLastBytes = 4u << 20;

// A file in <cache>/last/<target>/, opened without following a symlink at any step.
std::optional<std::string> read_last_file(const fs::path& root, const std::string& target,
                                          const std::string& file) {
  if (!is_plain_name(target) || !is_plain_name(file)) return std::nullopt;
  UniqueFd root_fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (root_fd.get() < 0) return std::nullopt;
  UniqueFd dir_fd(
      ::openat(root_fd.get(), target.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.get() < 0) return std::nullopt;
  UniqueFd fd(::openat(dir_fd.get(), file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<std::uint64_t>(st.st_size) > kMaxLastBytes)
    return std::nullopt;
  auto text = read_fd(fd.get(), kMaxLastRecordBytes);
  if (!text || text->size() > kMaxLastBytes) return std::nullopt;
  return text;
}

nlohmann::json last_document(const LastBuild& last) {
  return {{"kiln_last", 1},
          {"build", {{"key", last.key}, {"wheel", last.wheel}, {"backend", last.backend}}},
          {"inputs", last.inputs}};
}

}  // namespace

Expected<void> Store::record_last(const LastBuild& last) const {
  std::string text = last_document(last).dump(2) + "\n";
  const std::string file = cat(last.package, ".json");
  if (read_last_file(last_root(), last.target, file) == text) return {};
  KILN_CHECK(write_file_atomic(last_inputs(last.target, last.package), text));
  // Any change of a record changes <cache>/last itself (a rename into it), for the index's stat.
  return write_file_atomic(last_root() / ".changed", cat(last.target, "/", file, "\n"));
}

std::optional<LastBuild> Store::read_last(const std::string& target,
                                          const std::string& normalized_name) const {
  auto text = read_last_file(last_root(), target, cat(normalized_name, ".json"));
  if (!text) return std::nullopt;
  nlohmann::json doc = parse_json(*text);
  if (doc.is_discarded() || !doc.is_object()) return std::nullopt;
  LastBuild out;
  out.target = target;
  out.package = normalized_name;
  if (doc.value("kiln_last", nlohmann::json()) != 1) {  // an older kiln's: the inputs alone
    out.inputs = std::move(doc);
    return out;
  }
  auto str = [](const nlohmann::json& j, const char* field) -> std::string {
    return j.is_object() && j.contains(field) && j[field].is_string() ? j[field].get<std::string>()
                                                                      : "";
  };
  const nlohmann::json build = doc.value("build", nlohmann::json());
  out.key = str(build, "key");
  out.wheel = str(build, "wheel");
  out.backend = str(build, "backend");
  if (!is_sha256_hex(out.key) || !is_plain_name(out.wheel) || !out.wheel.ends_with(".whl"))
    out.key.clear(), out.wheel.clear();
  if (doc.contains("inputs") && doc["inputs"].is_object()) out.inputs = doc["inputs"];
  return out;
}

std::vector<LastBuild> Store::last_builds() const {
  std::vector<LastBuild> out;
  std::error_code ec;
  for (const auto& t : fs::directory_iterator(last_root(), ec)) {
    std::string target = t.path().filename().string();
    if (target.empty() || target[0] == '.' || !t.is_directory(ec) || t.is_symlink(ec)) continue;
    std::error_code ec2;
    for (const auto& f : fs::directory_iterator(t.path(), ec2)) {
      std::string file = f.path().filename().string();
      if (file.size() <= 5 || file[0] == '.' || !file.ends_with(".json")) continue;
      auto last = read_last(target, file.substr(0, file.size() - 5));
      if (last && !last->key.empty()) out.push_back(std::move(*last));
      if (out.size() >= 100000) break;  // a bound on what a stranger's cache can make us hold
    }
  }
  std::sort(out.begin(), out.end(), [](const LastBuild& a, const LastBuild& b) {
    return std::tie(a.target, a.package) < std::tie(b.target, b.package);
  });
  return out;
}

Expected<Lock> Store::lock(const std::string& key) const {
  return FileLock::acquire(lock_path(key));
}

std::optional<Lock> Store::try_lock(const std::string& key) const {
  const fs::path path = lock_path(key);
  if (!ensure_directory(path.parent_path())) return std::nullopt;
  return FileLock::try_acquire(path, /*create=*/true);
}

Expected<Entry> Store::commit(const std::string& key, const fs::path& wheel, EntryInfo info,
                              std::string_view attestation) const {
  fs::path final_dir = entry_dir(key);
  KILN_CHECK(ensure_directory(final_dir.parent_path()));
  KILN_TRY(Staging staging, this->staging("commit-"));
  fs::path staged_wheel = staging.path() / wheel.filename();
  std::error_code ec;
  fs::rename(wheel, staged_wheel, ec);
  if (ec) {  // another filesystem: copy
    fs::copy_file(wheel, staged_wheel, ec);
    if (ec) return Error::failed(cat("cannot stage ", wheel.string(), ": ", ec.message()));
  }
  fault_point("commit");  // #1: the wheel staged
  KILN_TRY(std::string sha, sha256_file(staged_wheel));
  info.key = key;
  info.wheel = wheel.filename().string();
  info.sha256 = sha;
  info.size = static_cast<std::uint64_t>(fs::file_size(staged_wheel));
  info.committed_at = static_cast<std::int64_t>(std::time(nullptr));
  {
    int fd = ::open(staged_wheel.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  if (!attestation.empty()) {
    if (attestation.size() > kMaxAttestationBytes)
      return Error::failed(cat("the attestation of ", info.wheel, " is too large"));
    info.attestation = attestation_file_name(info.wheel);
    KILN_CHECK(write_file_atomic(staging.path() / info.attestation, attestation));
  }
  // What is written reads back: a field a reader would refuse (too long, a control character)
  // fails the commit here, never every later read.
  KILN_CHECK(parse_entry_info(info.text()));
  KILN_CHECK(write_file_atomic(staging.path() / "entry.json", info.text()));
  fault_point("commit");  // #2: entry.json written, not yet renamed into wheels/
  ::chmod(staging.path().c_str(), 0755);
  if (::rename(staging.path().c_str(), final_dir.c_str()) != 0)
    return Error::failed(cat("cannot commit cache entry ", key, ": ", std::strerror(errno)));
  staging.dir.release();
  fault_point("commit");  // #3: renamed, the directory not yet synced
  KILN_CHECK(fsync_directory(final_dir.parent_path()));
  auto entry = lookup(key);
  if (!entry) return Error::failed(cat("cache entry ", key, " vanished after commit"));
  return *entry;
}

Expected<std::optional<std::string>> Store::read_attestation(const Entry& entry) const {
  if (entry.info.attestation.empty()) return std::optional<std::string>();
  UniqueFd dir(::open(entry.dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0)
    return Error::failed(cat("cannot open cache entry ", entry.key, ": ", std::strerror(errno)));
  KILN_TRY(std::string text, read_beneath(dir.get(), entry.info.attestation, kMaxAttestationBytes));
  return std::optional<std::string>(std::move(text));
}

std::vector<Entry> Store::list() const {
  std::vector<Entry> out;
  for (const auto& key : keys())
    if (auto e = lookup(key)) out.push_back(std::move(*e));
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.info.package, a.info.version, a.key) <
           std::tie(b.info.package, b.info.version, b.key);
  });
  return out;
}

std::vector<VerifyProblem> Store::verify() const {
  std::vector<VerifyProblem> problems;
  for (const auto& key : keys()) {  // sorted
    EntryRead read = read_entry(key);
    switch (read.state) {
      case EntryRead::State::Usable:
        if (auto problem = damage(read.entry)) problems.push_back({key, *problem});
        break;
      case EntryRead::State::Missing:
        break;  // removed meanwhile
      case EntryRead::State::Incomplete:
        problems.push_back({key, "entry is incomplete (no entry.json)"});
        break;
      case EntryRead::State::Unusable:
        problems.push_back({key, read.reason});
        break;
    }
  }
  return problems;
}

Expected<void> Store::remove(const std::string& key) const {
  std::error_code ec;
  fs::path doomed = tmp_root() / cat("remove-", key, "-", ::getpid());
  KILN_CHECK(ensure_directory(tmp_root()));
  fs::rename(entry_dir(key), doomed, ec);  // atomic disappearance, then cleanup
  if (ec && ec != std::errc::no_such_file_or_directory)
    return Error::failed(cat("cannot remove cache entry ", key, ": ", ec.message()));
  fs::remove_all(doomed, ec);
  return {};
}

Expected<GcResult> Store::gc(bool all) const {
  KILN_CHECK(recognise());
  GcResult removed;
  std::error_code ec;
  // Staging leftovers: a live process holds the lock of its staging directory (see staging()), so
  // what can be locked here belongs to a process that is gone (killed, or crashed).
  std::vector<fs::path> leftovers;
  for (const auto& d : fs::directory_iterator(tmp_root(), ec)) leftovers.push_back(d.path());
  for (const auto& path : leftovers) {
    std::error_code rm;
    if (fs::is_symlink(path, rm)) {  // never kiln's, never followed (nor locked)
      if (fs::remove(path, rm)) ++removed.items;
      continue;
    }
    auto lock = FileLock::try_acquire(path);
    if (!lock) continue;
    std::uint64_t bytes = tree_bytes(path);
    auto n = fs::remove_all(path, rm);
    if (!rm) removed.items += static_cast<std::uint64_t>(n), removed.bytes += bytes;
  }
  GcResult git = gc_git_mirrors();
  removed.items += git.items, removed.bytes += git.bytes;
  GcResult made = gc_made();
  removed.items += made.items, removed.bytes += made.bytes;
  GcResult roots = gc_build_roots();
  removed.build_roots += roots.items, removed.bytes += roots.bytes;
  // Object cache entries: with `all` every one; else the damaged ones (a build would only ever
  // remove one it needs again).
  for (const auto& rel : object_files()) {
    std::string problem;
    bool gone = false;
    std::uint64_t bytes = tree_bytes(root_ / rel);
    if (all) {
      std::error_code rm;
      if (fs::remove(root_ / rel, rm)) ++removed.items, removed.bytes += bytes;
    } else if (!load_or_remove(root_ / rel, problem, gone) && gone) {
      log::info(cat("removed ", rel, ": ", problem));
      ++removed.items, removed.bytes += bytes;
    }
  }
  if (all) {
    for (const auto& e : list()) {
      (void)ensure_directory(lock_path(e.key).parent_path());
      auto lock = FileLock::try_acquire(lock_path(e.key), /*create=*/true);
      if (!lock) {  // never delete what a build holds
        log::info(cat("kept ", e.wheel.filename().string(), ": a build holds its key (",
                      e.key.substr(0, 16), ")"));
        continue;
      }
      std::uint64_t bytes = tree_bytes(wheels() / e.key);
      KILN_CHECK(remove(e.key));
      ++removed.items, removed.bytes += bytes;
    }
  }
  return removed;
}

}  // namespace kiln::cache
