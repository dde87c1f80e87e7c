#include "core/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include "core/strings.h"

namespace kiln {

namespace {

std::string errno_text() {
  return std::strerror(errno);
}

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}() ^
                                          static_cast<std::uint64_t>(::getpid())};
  static const char* chars = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 10; ++i) s += chars[rng() % 36];
  return s;
}

}  // namespace

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

Expected<RegularFile> open_regular(const fs::path& path, int flags) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | flags));
  if (fd.get() < 0)
    return Error::failed(cat("cannot read ", path.string(), ": ", std::strerror(errno)));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return Error::failed(cat("cannot stat ", path.string(), ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return Error::bad_input(cat(path.string(), " is not a regular file"));
  return RegularFile{std::move(fd), static_cast<std::uint64_t>(st.st_size),
                     (st.st_mode & 0111) != 0};
}

bool path_within(const fs::path& path, const fs::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p)
    if (p == path.end() || *p != *r) return false;
  return true;
}

namespace {

Expected<void> check_components(const fs::path& path, const fs::path& named) {
  fs::path at;
  for (const auto& part : path) {
    at /= part;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0)
      return Error::failed(cat(named.string(), ": cannot stat ", at.string(), ": ", errno_text()));
    if (st.st_uid != 0 && st.st_uid != ::geteuid())
      return Error::bad_input(cat(named.string(), ": ", at.string(), " is owned by uid ", st.st_uid,
                                  ", neither root nor this user"));
    bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
    if (!S_ISLNK(st.st_mode) && (st.st_mode & S_IWOTH) && !sticky_dir)
      return Error::bad_input(cat(named.string(), ": ", at.string(), " is writable by anyone"));
  }
  return {};
}

}  // namespace

Expected<void> check_trusted_path(const fs::path& path) {
  if (!path.is_absolute()) return Error::bad_input(cat(path.string(), " is not an absolute path"));
  KILN_CHECK(check_components(path.lexically_normal(), path));
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec) return Error::failed(cat(path.string(), ": ", ec.message()));
  return check_components(real, path);
}

Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::failed(cat("cannot read ", path.string(), ": ", errno_text()));
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Error::failed(cat("error reading ", path.string()));
  return data;
}

Expected<std::string> read_file(const fs::path& path, std::uint64_t max_bytes) {
  auto too_large = [&] {
    return Error::failed(cat(path.string(), " is larger than ", max_bytes, " bytes"));
  };
  // Never more than max_bytes + 1 read, whatever the path names (/dev/zero, a pipe that keeps
  // writing): a regular file is judged by its size first, anything else by what it gives.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return Error::failed(cat("cannot read ", path.string(), ": ", errno_text()));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || S_ISDIR(st.st_mode))
    return Error::failed(cat("cannot read ", path.string(), ": not a file"));
  if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > max_bytes) return too_large();
  std::string data;
  char buf[65536];
  while (data.size() <= max_bytes) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;  // a pipe with nothing more to give now
    if (n < 0) return Error::failed(cat("error reading ", path.string(), ": ", errno_text()));
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  if (data.size() > max_bytes) return too_large();
  return data;
}

Expected<std::string> read_beneath(int dir, std::string_view relative, std::uint64_t max_bytes) {
  auto parts = split(relative, "/", false);
  for (const auto& part : parts)
    if (part.empty() || part == "." || part == "..")
      return Error::failed(cat(relative, ": not a plain relative path"));
  UniqueFd fd(::dup(dir));
  int err = fd.get() < 0 ? errno : 0;
  for (std::size_t i = 0; i < parts.size() && fd.get() >= 0; ++i) {
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    if (i + 1 < parts.size()) flags |= O_DIRECTORY;
    int next = ::openat(fd.get(), parts[i].c_str(), flags);
    err = next < 0 ? errno : 0;
    fd.reset(next);
  }
  if (fd.get() < 0)
    return Error::failed(cat(relative, ": ",
                             err == ELOOP || err == ENOTDIR
                                 ? "a symbolic link or not a directory (not followed)"
                                 : std::strerror(err)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return Error::failed(cat(relative, ": not a regular file"));
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes)
    return Error::failed(cat(relative, ": ", st.st_size, " bytes, over the limit of ", max_bytes));
  std::string data(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Error::failed(cat(relative, ": read failed"));
    got += static_cast<std::size_t>(n);
  }
  return data;
}

Expected<std::string> read_file_beneath(const fs::path& root, const fs::path& path,
                                        std::uint64_t max_bytes) {
  const fs::path relative = path.lexically_normal().lexically_relative(root.lexically_normal());
  if (relative.empty() || *relative.begin() == "..")
    return Error::failed(cat(path.string(), " is not under ", root.string()));
  UniqueFd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return Error::failed(cat("cannot open ", root.string(), ": ", errno_text()));
  auto data = read_beneath(dir.get(), relative.string(), max_bytes);
  if (!data) return Error::failed(cat(root.string(), "/", data.error().message));
  return data;
}

Expected<void> fsync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Error::failed(cat("cannot open directory ", dir.string(), ": ", errno_text()));
  ::fsync(fd);
  ::close(fd);
  return {};
}

Expected<void> ensure_directory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Error::failed(cat("cannot create directory ", dir.string(), ": ", ec.message()));
  return {};
}

void remove_stale_staging(const fs::path& dest) {
  std::error_code ec;
  fs::remove_all(dest, ec);
  const fs::path parent = dest.parent_path().empty() ? fs::path(".") : dest.parent_path();
  const std::string prefix = cat(".", dest.filename().string(), ".tmp-");
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(parent, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) stale.push_back(e.path());
  for (const auto& path : stale) fs::remove_all(path, ec);
}

Expected<AtomicFile> AtomicFile::create(const fs::path& final_path, int mode) {
  fs::path dir = final_path.parent_path().empty() ? fs::path(".") : final_path.parent_path();
  KILN_CHECK(ensure_directory(dir));
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path temp = dir / cat(".", final_path.filename().string(), ".tmp-", random_suffix());
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd >= 0) {
      ::fchmod(fd, static_cast<mode_t>(mode));
      return AtomicFile(final_path, temp, fd);
    }
    if (errno != EEXIST)
      return Error::failed(cat("cannot create ", temp.string(), ": ", errno_text()));
  }
  return Error::failed(cat("cannot create a temporary file in ", dir.string()));
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : final_(std::move(other.final_)),
      temp_(std::move(other.temp_)),
      fd_(other.fd_),
      committed_(other.committed_) {
  other.fd_ = -1;
  other.committed_ = true;
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
}

Expected<void> AtomicFile::write(std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::failed(cat("cannot write ", final_.string(), ": ", errno_text()));
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return {};
}

Expected<void> AtomicFile::commit() {
  if (::fsync(fd_) != 0)
    return Error::failed(cat("cannot sync ", final_.string(), ": ", errno_text()));
  if (::close(fd_) != 0) {
    fd_ = -1;
    return Error::failed(cat("cannot close ", final_.string(), ": ", errno_text()));
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), final_.c_str()) != 0)
    return Error::failed(
        cat("cannot rename ", temp_.string(), " to ", final_.string(), ": ", errno_text()));
  committed_ = true;
  return fsync_directory(final_.parent_path().empty() ? fs::path(".") : final_.parent_path());
}

Expected<void> write_file_atomic(const fs::path& path, std::string_view data, int mode) {
  KILN_TRY(AtomicFile file, AtomicFile::create(path, mode));
  KILN_CHECK(file.write(data));
  return file.commit();
}

Expected<TempDir> TempDir::create(const fs::path& parent, std::string_view prefix) {
  KILN_CHECK(ensure_directory(parent));
  std::string templ = (parent / cat(prefix, "XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr)
    return Error::failed(
        cat("cannot create a temporary directory in ", parent.string(), ": ", errno_text()));
  return TempDir(fs::path(templ));
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string env_value(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

fs::path absolute_path(const fs::path& path) {
  std::string s = path.string();
  if (s == "~" || s.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (home) return fs::path(home) / s.substr(s.size() > 1 ? 2 : 1);
  }
  std::error_code ec;
  fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal();
}

}  // namespace kiln

#include <algorithm>

#include "core/hash.h"

namespace kiln {

Expected<std::string> tree_sha256(const fs::path& dir) {
  std::vector<fs::path> entries;
  std::error_code ec;
  auto it = fs::recursive_directory_iterator(dir, fs::directory_options::none, ec);
  if (ec) return Error::failed(cat("cannot read directory ", dir.string(), ": ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return Error::failed(cat("cannot read directory ", dir.string(), ": ", ec.message()));
    const fs::path& p = it->path();
    std::string name = p.filename().string();
    if (name == "__pycache__" || name == ".git") {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (p.extension() == ".pyc") continue;
    if (it->is_symlink() || it->is_regular_file()) entries.push_back(p);
  }
  std::vector<std::pair<std::string, fs::path>> rel;
  for (const auto& p : entries) rel.emplace_back(fs::relative(p, dir).generic_string(), p);
  std::sort(rel.begin(), rel.end());
  Sha256 tree;
  for (const auto& [name, p] : rel) {
    std::string line;
    if (fs::is_symlink(p)) {
      line = cat("link ", name, " ", fs::read_symlink(p).string(), "\n");
    } else {
      KILN_TRY(std::string digest, sha256_file(p));
      bool exec = (fs::status(p).permissions() & fs::perms::owner_exec) != fs::perms::none;
      line = cat(exec ? "exec " : "file ", name, " ", digest, "\n");
    }
    tree.update(line);
  }
  return tree.hex_digest();
}

std::uint64_t tree_bytes(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return 0;
  if (S_ISREG(st.st_mode)) return static_cast<std::uint64_t>(st.st_size);
  if (!S_ISDIR(st.st_mode)) return 0;
  std::uint64_t total = 0;
  std::error_code ec;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat f {};
    if (::lstat(it->path().c_str(), &f) == 0 && S_ISREG(f.st_mode))
      total += static_cast<std::uint64_t>(f.st_size);
  }
  return total;
}

}  // namespace kiln
