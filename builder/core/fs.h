// Files: whole-file reads, atomic writes (temp + fsync + rename), temporary directories.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "core/expected.h"

namespace kiln {

namespace fs = std::filesystem;

Expected<std::string> read_file(const fs::path& path);
// The apparent size of the regular files at and under `path`; links are not followed (the path
// itself is lstat'ed, and the walk does not enter a link to a directory).
std::uint64_t tree_bytes(const fs::path& path);

// The same, for a file that must not be larger than `max_bytes` (an error names the limit).
Expected<std::string> read_file(const fs::path& path, std::uint64_t max_bytes);

// `relative` ('/'-separated, no empty, "." or ".." part) opened under the directory `dir` one
// component at a time without following a link: a regular file of at most `max_bytes`, or why
// not. For what a stranger's code may have made (a build root after its build, a site directory).
Expected<std::string> read_beneath(int dir, std::string_view relative, std::uint64_t max_bytes);
// The same for `path` under the directory `root` (`root` itself is opened as it is).
Expected<std::string> read_file_beneath(const fs::path& root, const fs::path& path,
                                        std::uint64_t max_bytes);

// An owned file descriptor, closed when it dies.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~UniqueFd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1);
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

// `path` opened read-only (with `flags` added, such as O_NOFOLLOW) and fstat'ed: a regular file
// with its size and whether it is executable, or why not.
struct RegularFile {
  UniqueFd fd;
  std::uint64_t size = 0;
  bool executable = false;
};
Expected<RegularFile> open_regular(const fs::path& path, int flags = 0);

// Writes `data` to a temp file beside `path`, fsyncs it, renames it over `path` and fsyncs the
// directory: readers see the old file or the new one, never a torn one.
Expected<void> write_file_atomic(const fs::path& path, std::string_view data, int mode = 0644);

// A file written under a temporary name and published by commit(); destroyed uncommitted, it is
// removed. Used for downloads and wheels.
class AtomicFile {
 public:
  static Expected<AtomicFile> create(const fs::path& final_path, int mode = 0644);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  Expected<void> write(std::string_view data);
  const fs::path& temp_path() const { return temp_; }
  int fd() const { return fd_; }
  Expected<void> commit();  // fsync, rename to the final path, fsync the directory

 private:
  AtomicFile(fs::path final_path, fs::path temp, int fd)
      : final_(std::move(final_path)), temp_(std::move(temp)), fd_(fd) {}
  fs::path final_;
  fs::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

Expected<void> fsync_directory(const fs::path& dir);
Expected<void> ensure_directory(const fs::path& dir);

// A directory removed with its contents when this object dies (unless released).
class TempDir {
 public:
  static Expected<TempDir> create(const fs::path& parent, std::string_view prefix);
  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
  const fs::path& path() const { return path_; }
  fs::path release() { return std::exchange(path_, {}); }

 private:
  explicit TempDir(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
};

// Removes `dest` and the staging directories (TempDir::create(dest's parent, ".<name>.tmp-")) that
// a process which died left beside it. Call while holding the lock that guards making `dest`.
void remove_stale_staging(const fs::path& dest);

// Whether `path` is `root` or lies under it, compared component by component (both as given).
bool path_within(const fs::path& path, const fs::path& root);

// Whether `path` (absolute) is one only root and this user control: every component from / down,
// as written (links not followed) and where it leads, owned by root or this user, and none but a
// sticky directory writable by everyone. The error names the component and why. For what a
// stranger's file names as a program or directory kiln would run or read.
Expected<void> check_trusted_path(const fs::path& path);

// The value of the environment variable `name`, "" when it is unset.
std::string env_value(const char* name);

// "~/x" and relative paths made absolute against the current directory.
fs::path absolute_path(const fs::path& path);

}  // namespace kiln

namespace kiln {
// sha256 over a directory tree: sorted relative paths, each with its kind (file, executable file,
// symlink and its target) and content hash. Skips __pycache__, *.pyc and .git.
Expected<std::string> tree_sha256(const fs::path& dir);
}  // namespace kiln
