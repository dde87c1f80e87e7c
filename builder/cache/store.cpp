#include "cache/store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;


std::optional<Entry> Store::lookup(const std::string& key) const {
  fs::path dir = entry_dir(key);
  auto text = read_file(dir / "entry.json");
  if (!text) return std::nullopt;
  nlohmann::json info = nlohmann::json::parse(*text, nullptr, false);
  if (info.is_discarded() || !info.contains("wheel") || !info.contains("sha256")) return std::nullopt;
  Entry e;
  e.key = key;
  e.dir = dir;
  e.wheel = dir / info["wheel"].get<std::string>();
  e.sha256 = info["sha256"].get<std::string>();
  e.size = info.value("size", std::uint64_t{0});
  e.info = std::move(info);
  std::error_code ec;
  if (!fs::is_regular_file(e.wheel, ec)) return std::nullopt;
  return e;
}

Expected<Lock> Store::lock(const std::string& key) const {
  return FileLock::acquire(root_ / "locks" / (key + ".lock"));
}

Expected<Entry> Store::commit(const std::string& key, const fs::path& wheel, nlohmann::json info) const {
  fs::path final_dir = entry_dir(key);
  KILN_CHECK(ensure_directory(final_dir.parent_path()));
  KILN_TRY(TempDir staging, TempDir::create(tmp_root(), "commit-"));
  fs::path staged_wheel = staging.path() / wheel.filename();
  std::error_code ec;
  fs::rename(wheel, staged_wheel, ec);
  if (ec) {  // another filesystem: copy
    fs::copy_file(wheel, staged_wheel, ec);
    if (ec) return Error::failed(cat("cannot stage ", wheel.string(), ": ", ec.message()));
  }
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
  ::chmod(staging.path().c_str(), 0755);
  if (::rename(staging.path().c_str(), final_dir.c_str()) != 0)
    return Error::failed(cat("cannot commit cache entry ", key, ": ", std::strerror(errno)));
  staging.release();
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
    return std::tie(a.info["package"], a.info["version"], a.key) < std::tie(b.info["package"], b.info["version"], b.key);
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
    auto sha = sha256_file(e->wheel);
    if (!sha) problems.push_back({key, sha.error().message});
    else if (*sha != e->sha256)
      problems.push_back({key, cat(e->wheel.filename().string(), ": sha256 ", *sha, " does not match the recorded ", e->sha256)});
  }
  std::sort(problems.begin(), problems.end(), [](const auto& a, const auto& b) { return a.key < b.key; });
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
  // Staging directories of processes that are gone: kiln holds no lock on tmp/, so gc removes only
  // entries older than an hour (a live build touches its staging dir as it works).
  for (const auto& d : fs::directory_iterator(tmp_root(), ec)) {
    auto age = fs::file_time_type::clock::now() - fs::last_write_time(d.path(), ec);
    if (ec || age < std::chrono::hours(1)) continue;
    removed += static_cast<std::uint64_t>(fs::remove_all(d.path(), ec));
  }
  if (all) {
    for (const auto& e : list()) {
      auto lock = this->lock(e.key);  // never delete what a build holds
      if (!lock) continue;
      KILN_CHECK(remove(e.key));
      ++removed;
    }
  }
  return removed;
}

}  // namespace kiln::cache
