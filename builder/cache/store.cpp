#include "cache/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/fault.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

std::optional<Entry> Store::lookup(const std::string& key) const {
  fs::path dir = entry_dir(key);
  auto text = read_file(dir / "entry.json");
  if (!text) return std::nullopt;
  nlohmann::json info = nlohmann::json::parse(*text, nullptr, false);
  // entry.json is kiln's, but a damaged one must read as incomplete, never name a file elsewhere.
  if (info.is_discarded() || !info.is_object() || !info.contains("wheel") ||
      !info["wheel"].is_string() || !info.contains("sha256") || !info["sha256"].is_string())
    return std::nullopt;
  std::string name = info["wheel"].get<std::string>();
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    return std::nullopt;
  Entry e;
  e.key = key;
  e.dir = dir;
  e.wheel = dir / name;
  e.sha256 = info["sha256"].get<std::string>();
  e.size = info.contains("size") && info["size"].is_number_unsigned()
               ? info["size"].get<std::uint64_t>()
               : 0;
  e.info = std::move(info);
  std::error_code ec;
  if (!fs::is_regular_file(e.wheel, ec)) return std::nullopt;
  return e;
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
  auto e = lookup(key);
  std::optional<std::string> problem;
  if (e)
    problem = damage(*e);
  else if (std::error_code ec; fs::exists(entry_dir(key), ec))
    problem = "the entry is incomplete";
  if (!problem) return e;
  removed = *problem;
  auto gone = remove(key);
  if (!gone) removed += cat(" (and it could not be removed: ", gone.error().message, ")");
  return std::nullopt;
}

namespace {
// An object cache entry's first line: "kiln-object 1 <sha256 of the rest>".
constexpr std::string_view kObjectMagic = "kiln-object 1 ";
}  // namespace

fs::path Store::object_path(const std::string& key, std::string_view suffix) const {
  return objects() / key.substr(0, 2) / cat(key, suffix);
}

Expected<void> Store::store_object(const std::string& key, std::string_view suffix,
                                   std::string_view bytes) const {
  if (!is_sha256_hex(key)) return Error::failed(cat("not an object key: ", key));
  fs::path path = object_path(key, suffix);
  KILN_CHECK(ensure_directory(path.parent_path()));
  std::string entry;
  entry.reserve(kObjectMagic.size() + 65 + bytes.size());
  entry.append(kObjectMagic).append(sha256_hex(bytes)).append("\n").append(bytes);
  return write_file_atomic(path, entry);
}

std::optional<std::string> Store::load_object(const std::string& key,
                                              std::string_view suffix) const {
  if (!is_sha256_hex(key)) return std::nullopt;
  auto data = read_file(object_path(key, suffix));
  const std::size_t header = kObjectMagic.size() + 64 + 1;
  if (!data || data->size() < header || !data->starts_with(kObjectMagic) ||
      (*data)[header - 1] != '\n')
    return std::nullopt;
  std::string_view recorded = std::string_view(*data).substr(kObjectMagic.size(), 64);
  std::string bytes = data->substr(header);
  if (sha256_hex(bytes) != recorded) {
    log::verbose(cat("object cache: ", object_path(key, suffix).string(),
                     " does not match its recorded sha256; building it again"));
    return std::nullopt;
  }
  return bytes;
}

Expected<Staging> Store::staging(std::string_view prefix) const {
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

Expected<Lock> Store::lock(const std::string& key) const {
  return FileLock::acquire(root_ / "locks" / (key + ".lock"));
}

Expected<Entry> Store::commit(const std::string& key, const fs::path& wheel,
                              nlohmann::json info) const {
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
  info["key"] = key;
  info["wheel"] = wheel.filename().string();
  info["sha256"] = sha;
  info["size"] = static_cast<std::uint64_t>(fs::file_size(staged_wheel));
  info["committed_at"] = static_cast<std::int64_t>(std::time(nullptr));
  {
    int fd = ::open(staged_wheel.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  KILN_CHECK(write_file_atomic(staging.path() / "entry.json", info.dump(2) + "\n"));
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

std::vector<Entry> Store::list() const {
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root_ / "wheels", ec)) {
    if (auto e = lookup(d.path().filename().string())) out.push_back(std::move(*e));
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    auto field = [](const Entry& e, const char* name) {
      return e.info.value(name, nlohmann::json()).dump();
    };
    return std::tuple(field(a, "package"), field(a, "version"), a.key) <
           std::tuple(field(b, "package"), field(b, "version"), b.key);
  });
  return out;
}

std::vector<VerifyProblem> Store::verify() const {
  std::vector<VerifyProblem> problems;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root_ / "wheels", ec)) {
    std::string key = d.path().filename().string();
    auto e = lookup(key);
    if (!e) {
      problems.push_back({key, "entry is incomplete (no entry.json or no wheel)"});
      continue;
    }
    if (auto problem = damage(*e)) problems.push_back({key, *problem});
  }
  std::sort(problems.begin(), problems.end(),
            [](const auto& a, const auto& b) { return a.key < b.key; });
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

Expected<std::uint64_t> Store::gc(bool all) const {
  std::uint64_t removed = 0;
  std::error_code ec;
  // Staging leftovers: a live process holds the lock of its staging directory (see staging()), so
  // what can be locked here belongs to a process that is gone (killed, or crashed).
  std::vector<fs::path> leftovers;
  for (const auto& d : fs::directory_iterator(tmp_root(), ec)) leftovers.push_back(d.path());
  for (const auto& path : leftovers) {
    auto lock = FileLock::try_acquire(path);
    if (!lock) continue;
    std::error_code rm;
    auto n = fs::remove_all(path, rm);
    if (!rm) removed += static_cast<std::uint64_t>(n);
  }
  if (all) {
    for (const auto& e : list()) {
      auto lock = FileLock::try_acquire(root_ / "locks" / (e.key + ".lock"), /*create=*/true);
      if (!lock) {  // never delete what a build holds
        log::info(cat("kept ", e.wheel.filename().string(), ": a build holds its key (",
                      e.key.substr(0, 16), ")"));
        continue;
      }
      KILN_CHECK(remove(e.key));
      ++removed;
    }
  }
  return removed;
}

}  // namespace kiln::cache
