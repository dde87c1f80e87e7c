#include "index/scan.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::index {

namespace fs = std::filesystem;

namespace {

using Fd = UniqueFd;

struct ArchiveCloser {
  void operator()(struct archive* a) const { archive_read_free(a); }
};

bool is_plain_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name)
    if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

std::int64_t to_ns(const struct timespec& ts) {
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

Expected<int> open_wheel(const fs::path& entry_dir, const std::string& filename,
                         std::uint64_t expected_size) {
  if (!is_plain_name(filename))
    return Error::bad_input(cat("wheel file name '", filename, "' is not a plain file name"));
  Fd dir(::open(entry_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir.get() < 0)
    return Error::failed(cat("cannot open ", entry_dir.string(), ": ", std::strerror(errno)));
  Fd file(::openat(dir.get(), filename.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (file.get() < 0)
    return Error::failed(
        cat("cannot open ", (entry_dir / filename).string(), ": ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::failed(cat((entry_dir / filename).string(), ": not a regular file"));
  if (static_cast<std::uint64_t>(st.st_size) != expected_size)
    return Error::failed(cat((entry_dir / filename).string(), ": size ", st.st_size,
                             " is not the recorded ", expected_size));
  return file.release();
}

Expected<int> WheelVerifier::open(const fs::path& entry_dir, const std::string& filename,
                                  std::uint64_t size, const std::string& sha256) {
  KILN_TRY(int raw, open_wheel(entry_dir, filename, size));
  Fd fd(raw);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Error::failed(cat("cannot stat ", (entry_dir / filename).string()));
  Identity id{static_cast<std::uint64_t>(st.st_dev),
              static_cast<std::uint64_t>(st.st_ino),
              static_cast<std::uint64_t>(st.st_size),
              to_ns(st.st_mtim),
              to_ns(st.st_ctim),
              sha256};
  const std::string key = (entry_dir / filename).string();
  {
    std::lock_guard lock(mutex_);
    auto it = verified_.find(key);
    if (it != verified_.end() && it->second == id) return fd.release();
  }
  Sha256 hash;
  std::string buf(1 << 20, '\0');
  for (off_t at = 0;;) {
    ssize_t n = ::pread(fd.get(), buf.data(), buf.size(), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::failed(cat("cannot read ", key, ": ", std::strerror(errno)));
    if (n == 0) break;
    hash.update(buf.data(), static_cast<std::size_t>(n));
    at += n;
  }
  std::string got = hash.hex_digest();
  if (got != sha256)
    return Error::failed(cat(key, ": its bytes no longer hash to the recorded sha256 ", sha256,
                             " (", got, "); not served"));
  std::lock_guard lock(mutex_);
  verified_[key] = std::move(id);
  return fd.release();
}

Expected<std::string> read_wheel_metadata(const fs::path& wheel, std::string_view filename,
                                          std::uint64_t max_bytes) {
  auto name = index_wheel_name(filename);
  if (!name) return std::move(name).error();
  std::string wanted = cat(name->distribution, "-", name->version, ".dist-info/METADATA");
  std::string where = wheel.string();
  const std::string too_large =
      cat("inflates past ", max_bytes == manifest::kMaxWheelTextBytes
                                ? std::string(manifest::kWheelTextLimit)
                                : cat("the limit of ", max_bytes, " bytes"));

  Fd fd(::open(wheel.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return Error::failed(cat("cannot open ", where, ": ", std::strerror(errno)));
  std::unique_ptr<struct archive, ArchiveCloser> a(archive_read_new());
  if (!a) return Error::failed("cannot allocate a libarchive reader");
  // The seekable reader reads the central directory (what pip and uv trust), not local headers.
  if (archive_read_support_format_zip_seekable(a.get()) != ARCHIVE_OK)
    return Error::failed("libarchive lacks zip support");
  if (archive_read_open_fd(a.get(), fd.get(), 65536) != ARCHIVE_OK)
    return Error::bad_input(cat(where, ": not a zip file: ", archive_error_string(a.get())));

  std::vector<std::pair<std::string, std::string>> found;  // top-level */METADATA members
  struct archive_entry* entry = nullptr;
  int rc;
  while ((rc = archive_read_next_header(a.get(), &entry)) == ARCHIVE_OK) {
    const char* raw = archive_entry_pathname(entry);
    std::string path = raw ? raw : "";
    bool exact = path == wanted;
    auto slash = path.find('/');
    bool candidate = slash != std::string::npos && path.find('/', slash + 1) == std::string::npos &&
                     path.substr(slash) == "/METADATA" &&
                     path.substr(0, slash).ends_with(".dist-info");
    if (!exact && !candidate) continue;
    if (archive_entry_size_is_set(entry) &&
        static_cast<std::uint64_t>(archive_entry_size(entry)) > max_bytes)
      return Error::bad_input(cat(where, ": ", path, " ", too_large));
    std::string data;
    char buf[65536];
    la_ssize_t n;
    while ((n = archive_read_data(a.get(), buf, sizeof buf)) > 0) {
      data.append(buf, static_cast<std::size_t>(n));
      if (data.size() > max_bytes) return Error::bad_input(cat(where, ": ", path, " ", too_large));
    }
    if (n < 0)
      return Error::bad_input(
          cat(where, ": cannot read ", path, ": ", archive_error_string(a.get())));
    if (exact) return data;
    found.emplace_back(path, std::move(data));
    if (found.size() > 8) break;
  }
  if (rc != ARCHIVE_EOF && rc != ARCHIVE_OK)
    return Error::bad_input(cat(where, ": ", archive_error_string(a.get())));
  if (found.size() == 1) return std::move(found[0].second);
  if (found.empty()) return Error::bad_input(cat(where, ": no ", wanted));
  return Error::bad_input(
      cat(where, ": no ", wanted, " and more than one other .dist-info/METADATA"));
}

namespace {

// The METADATA of `wheel` (entry `e`, its sha256 known), read once per sha256.
Expected<std::string> metadata_of(const fs::path& wheel, const WheelEntry& e, ScanMemo& memo) {
  auto cached = memo.metadata.find(e.sha256);
  if (cached == memo.metadata.end()) {
    KILN_TRY(std::string md, read_wheel_metadata(wheel, e.filename));
    cached = memo.metadata.emplace(e.sha256, std::move(md)).first;
  }
  return cached->second;
}

// One of kiln's own wheels: a regular kiln-wheels-*.whl of at most kMaxKilnWheelBytes, hashed once
// per identity, its METADATA read as an entry's is.
void scan_kiln_wheel(const fs::path& path, ScanResult& out, ScanMemo& memo,
                     std::map<ScanMemo::FileIdentity, std::string>& hashes) {
  const std::string filename = path.filename().string();
  auto skip = [&](std::string_view why) { out.skipped.push_back(cat(path.string(), ": ", why)); };
  auto name = index_wheel_name(filename);
  if (!name || name->project != "kiln-wheels") {
    skip("not a kiln-wheels wheel");
    return;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    skip("not a regular file");
    return;
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxKilnWheelBytes) {
    skip(cat("larger than ", kMaxKilnWheelBytes >> 20, " MiB"));
    return;
  }
  ScanMemo::FileIdentity id{
      static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
      static_cast<std::uint64_t>(st.st_size), to_ns(st.st_mtim), to_ns(st.st_ctim)};
  std::string sha;
  if (auto known = memo.kiln_wheels.find(id); known != memo.kiln_wheels.end()) {
    sha = known->second;
  } else if (auto hashed = sha256_file(path)) {
    sha = *hashed;
  } else {
    skip(hashed.error().message);
    return;
  }
  hashes[id] = sha;
  WheelEntry e;
  e.target = std::string(kEveryTarget);
  e.key = "kiln-wheels";
  e.dir = path.parent_path();
  e.filename = filename;
  e.size = static_cast<std::uint64_t>(st.st_size);
  e.sha256 = sha;
  auto md = metadata_of(path, e, memo);
  if (!md) {
    skip(md.error().message);
    return;
  }
  e.metadata = std::move(*md);
  out.entries.push_back(std::move(e));
}

// kiln's own wheels in <cache>/kiln-wheels/, for every target (kEveryTarget): at most
// kMaxKilnWheels regular files named kiln_wheels-*.whl of at most kMaxKilnWheelBytes each, in a
// folder that is no link (the server opens it without following one), each hashed once per
// identity, their METADATA read as an entry's is.
void scan_kiln_wheels(const cache::Store& store, ScanResult& out, ScanMemo& memo) {
  std::map<ScanMemo::FileIdentity, std::string> hashes;  // this scan's: what memo keeps next
  std::size_t seen = 0;
  auto walked = store.each_kiln_wheel([&](const fs::path& path) {
    if (++seen > kMaxKilnWheels)
      out.skipped.push_back(
          cat(path.string(), ": more than ", kMaxKilnWheels, " wheels in the folder"));
    else
      scan_kiln_wheel(path, out, memo, hashes);
    return true;
  });
  if (!walked) out.skipped.push_back(cat(walked.error().message, ": nothing of it served"));
  memo.kiln_wheels = std::move(hashes);
}

}  // namespace

ScanResult scan_cache(const fs::path& cache_root, ScanMemo& memo) {
  ScanResult out;
  const cache::Store store(cache_root);
  scan_kiln_wheels(store, out, memo);
  std::set<std::tuple<std::string, std::string, std::string>> last;  // (target, key, wheel)
  for (const auto& l : store.last_builds()) last.emplace(l.target, l.key, l.wheel);
  for (const auto& key : store.keys()) {
    cache::EntryRead read = store.read_entry(key);
    if (read.state == cache::EntryRead::State::Unusable) {
      out.skipped.push_back(cat("cache entry ", key, ": ", read.reason));
      continue;
    }
    if (!read) continue;  // removed meanwhile, or incomplete: not served
    const cache::Entry& entry = read.entry;
    WheelEntry e;
    e.key = key;
    e.dir = entry.dir;
    e.target = entry.info.target;
    e.filename = entry.wheel.filename().string();
    e.sha256 = entry.sha256;
    e.size = entry.size;
    e.committed_at = entry.info.committed_at;
    e.archs = entry.info.archs;
    auto md = metadata_of(entry.wheel, e, memo);
    if (!md) {
      out.skipped.push_back(cat("cache entry ", key, ": ", md.error().message));
      continue;
    }
    e.metadata = std::move(*md);
    if (auto attestation = store.read_attestation(entry); !attestation)
      out.skipped.push_back(cat("cache entry ", key,
                                ": its attestation is not served: ", attestation.error().message));
    else if (*attestation)
      e.attestation = std::move(**attestation);
    e.last = last.count({e.target, e.key, e.filename}) > 0;
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::set<std::string> served_keys(const fs::path& cache_root) {
  ScanMemo metadata;
  IndexModel model = build_model(std::move(scan_cache(cache_root, metadata).entries));
  std::set<std::string> out;
  for (const auto& [tname, t] : model.targets)
    for (const auto& [pname, p] : t.projects)
      for (const auto& f : p.files) out.insert(f.key);
  return out;
}

CacheIndex::CacheIndex(fs::path cache_root) : root_(std::move(cache_root)) {}

cache::ServedStamp CacheIndex::stat_wheels() const {
  return cache::Store(root_).served_stamp();
}

std::shared_ptr<const IndexModel> CacheIndex::current() {
  using namespace std::chrono;
  auto fresh = [&](const cache::ServedStamp& sig) {
    // A directory changed within the last second may change again within the same timestamp
    // tick: until it settles, rescan at most every 100 ms even when the signature is the same.
    return model_ && sig == signature_ &&
           (settled_ || steady_clock::now() - scanned_at_ < milliseconds(100));
  };
  cache::ServedStamp sig = stat_wheels();
  {
    std::lock_guard lock(model_mutex_);
    if (fresh(sig)) return model_;
  }
  std::lock_guard scan_lock(scan_mutex_);
  sig = stat_wheels();  // taken before the listing: a change during the scan shows next time
  {
    std::lock_guard lock(model_mutex_);
    if (fresh(sig)) return model_;  // another thread rescanned meanwhile
  }
  auto started = steady_clock::now();
  ScanResult scan = scan_cache(root_, memo_);
  std::set<std::string> live;
  for (const auto& e : scan.entries) live.insert(e.sha256);
  std::erase_if(memo_.metadata, [&](const auto& kv) { return !live.count(kv.first); });
  auto model = std::make_shared<IndexModel>(build_model(std::move(scan.entries)));
  model->skipped.insert(model->skipped.begin(), scan.skipped.begin(), scan.skipped.end());

  std::int64_t now_ns = static_cast<std::int64_t>(
      duration_cast<nanoseconds>(system_clock::now().time_since_epoch()).count());
  std::lock_guard lock(model_mutex_);
  for (const auto& s : model->skipped)
    if (reported_.insert(s).second) new_skipped_.push_back(s);
  model_ = std::move(model);
  signature_ = sig;
  auto settled = [now_ns](const cache::DirStamp& d) {
    return !d.exists || now_ns - d.mtime_ns > 1000000000;
  };
  settled_ = settled(sig.wheels) && settled(sig.last);
  scanned_at_ = started;
  return model_;
}

std::vector<std::string> CacheIndex::take_new_skipped() {
  std::lock_guard lock(model_mutex_);
  return std::exchange(new_skipped_, {});
}

}  // namespace kiln::index
