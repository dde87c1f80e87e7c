// The index model of a cache directory, kept current: rescanned when <cache>/wheels changes.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "core/expected.h"
#include "index/model.h"
#include "manifest/limits.h"

namespace kiln::index {

// The bytes of `<dist>-<version>.dist-info/METADATA` in a wheel (dist and version from the file
// name; a single top-level *.dist-info/METADATA is accepted when the names differ in spelling).
// Reads the zip's central directory (libarchive), at most `max_bytes` of the member: refused by
// the size the directory states, and again as soon as more is inflated.
Expected<std::string> read_wheel_metadata(const std::filesystem::path& wheel,
                                          std::string_view filename,
                                          std::uint64_t max_bytes = manifest::kMaxWheelTextBytes);

// Opens a wheel of the model for reading without following symlinks (neither the entry directory
// nor the file) and checks it is a regular file of the expected size. Returns the descriptor.
Expected<int> open_wheel(const std::filesystem::path& entry_dir, const std::string& filename,
                         std::uint64_t expected_size);

// Opens wheels for serving through open_wheel(), and hands one out only when its bytes hash to the
// sha256 it is served under (its strong ETag). A file is hashed once per identity (device, inode,
// size, modification and change times): changed in place, it is hashed again before it is served.
// Safe to call from many threads.
class WheelVerifier {
 public:
  Expected<int> open(const std::filesystem::path& entry_dir, const std::string& filename,
                     std::uint64_t size, const std::string& sha256);

 private:
  struct Identity {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    std::string sha256;
    bool operator==(const Identity&) const = default;
  };
  std::mutex mutex_;
  std::map<std::string, Identity> verified_;  // by path
};

// The entries of a cache as the index sees them (kiln's own wheels of <cache>/kiln-wheels/ too, for
// every target: kEveryTarget): only complete entries, as cache::Store::read_entry
// reads them (entry.json present, the wheel a regular file of the recorded size, neither a symlink,
// a sha256 recorded); METADATA and kiln's own wheels' hashes read through `memo`, which keeps
// what it reads. Unusable entries are
// returned in `skipped`. An entry that its package's last build for its target committed or hit
// (cache::Store::last_builds, the same wheel file name) is marked `last`.
struct ScanResult {
  std::vector<WheelEntry> entries;
  std::vector<std::string> skipped;
};
// What a scan keeps for the next: METADATA by wheel sha256, and the sha256 of each file of
// <cache>/kiln-wheels/ by its identity (a file that did not change is not hashed again).
struct ScanMemo {
  struct FileIdentity {
    std::uint64_t dev = 0, ino = 0, size = 0;
    std::int64_t mtime_ns = 0, ctime_ns = 0;
    auto operator<=>(const FileIdentity&) const = default;
  };
  std::map<std::string, std::string> metadata;      // wheel sha256 -> METADATA bytes
  std::map<FileIdentity, std::string> kiln_wheels;  // -> sha256
};
// <cache>/kiln-wheels/ holds a few of kiln's own wheels (a few MB each): at most this many files
// are looked at, each at most this large; the rest is left out, and said so.
inline constexpr std::size_t kMaxKilnWheels = 64;
inline constexpr std::uint64_t kMaxKilnWheelBytes = std::uint64_t(256) << 20;
ScanResult scan_cache(const std::filesystem::path& cache_root, ScanMemo& memo);

// The keys of the entries whose wheels `kiln serve` and `kiln index export` serve now: a scan,
// then build_model's rule (`kiln cache ls` marks them).
std::set<std::string> served_keys(const std::filesystem::path& cache_root);

// A model that follows the cache: current() costs a stat() of <cache>/wheels and one of
// <cache>/last and rescans when either changed (cache entries appear and disappear by rename,
// which changes wheels/; cache::Store::record_last renames a file into last/ on every change). Safe
// to call from many threads; a rescan blocks callers until it is done, so a request that arrives
// after a commit sees it.
class CacheIndex {
 public:
  explicit CacheIndex(std::filesystem::path cache_root);
  std::shared_ptr<const IndexModel> current();
  // Entries newly left out since the last call (each reported once), for the log.
  std::vector<std::string> take_new_skipped();
  const std::filesystem::path& root() const { return root_; }

 private:
  // wheels/, last/ (which wheel of a file name is served changes with it) and kiln-wheels/.
  cache::ServedStamp stat_wheels() const;

  std::filesystem::path root_;
  std::mutex scan_mutex_;   // one rescan at a time
  std::mutex model_mutex_;  // guards the fields below
  std::shared_ptr<const IndexModel> model_;
  cache::ServedStamp signature_;
  bool settled_ = false;  // the directory had not changed for a while when last scanned
  std::chrono::steady_clock::time_point scanned_at_;
  ScanMemo memo_;  // (scan_mutex_)
  std::set<std::string> reported_;
  std::vector<std::string> new_skipped_;
};

}  // namespace kiln::index
