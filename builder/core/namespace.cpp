#include "core/namespace.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln {

namespace {

// The new mount API through syscall(2): glibc wraps it only from 2.36, and the portable build
// (docs/portable.md) compiles against 2.28. Its constants, where the headers lack them, are
// the kernel's (linux/mount.h, linux/fcntl.h).
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif
#ifndef MOVE_MOUNT_F_EMPTY_PATH
#define MOVE_MOUNT_F_EMPTY_PATH 0x00000004
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

int open_tree_call(int dirfd, const char* path, unsigned flags) {
  return static_cast<int>(::syscall(SYS_open_tree, dirfd, path, flags));
}

int move_mount_call(int from_dirfd, const char* from_path, int to_dirfd, const char* to_path,
                    unsigned flags) {
  return static_cast<int>(
      ::syscall(SYS_move_mount, from_dirfd, from_path, to_dirfd, to_path, flags));
}

// More entries than this in /tmp, each a mount of its own, and kiln does without the namespace.
constexpr std::size_t kMaxTmpEntries = 20000;

Error failure(std::string_view what, int err = errno) {
  return Error::failed(cat(what, ": ", std::strerror(err)));
}

bool write_id_map(const char* path, const std::string& text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

std::size_t thread_count() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc/self/task", ec);
       !ec && it != fs::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

// A mount namespace of this process's own: root needs nothing more; anyone else (and a root
// without the right to mount, as in many containers) gets a user namespace mapping them to root.
// Returns errno, 0 on success.
int unshare_mounts(uid_t uid, gid_t gid) {
  if (uid == 0 && ::unshare(CLONE_NEWNS) == 0) return 0;
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return errno;
  if (!write_id_map("/proc/self/setgroups", "deny") ||
      !write_id_map("/proc/self/uid_map", cat("0 ", uid, " 1\n")) ||
      !write_id_map("/proc/self/gid_map", cat("0 ", gid, " 1\n")))
    return errno ? errno : EPERM;
  return 0;
}

// Whether the namespace can be made and /tmp mounted over, tried in a child first: a user
// namespace that cannot be mapped (or in which mounting is refused) would leave this process in it.
Expected<void> probe(uid_t uid, gid_t gid) {
  pid_t pid = ::fork();
  if (pid < 0) return failure("fork");
  if (pid == 0) {
    int err = unshare_mounts(uid, gid);
    if (err == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) err = errno;
    if (err == 0 && ::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
      err = errno;
    ::_exit(err > 0 && err < 256 ? err : (err ? 255 : 0));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return failure("waitpid");
  if (!WIFEXITED(status)) return Error::failed("the namespace probe died");
  if (int err = WEXITSTATUS(status); err != 0)
    return Error::failed(
        cat("a private mount namespace is not allowed here (", std::strerror(err), ")"));
  return {};
}

// Binds `from` (a detached mount) at `name` in the directory `dir`.
bool attach(int from, int dir, const char* name) {
  return move_mount_call(from, "", dir, name, MOVE_MOUNT_F_EMPTY_PATH) == 0;
}

// Puts every entry of the real /tmp (attached at /tmp/<aside>) back into the fresh one (`dir`):
// directories and files bound, symlinks made again.
Expected<void> bind_back(const std::string& aside, int dir, const std::vector<std::string>& names) {
  const std::string from = cat("/tmp/", aside, "/");
  for (const auto& n : names) {
    struct stat st;
    if (::lstat((from + n).c_str(), &st) != 0) continue;  // gone meanwhile
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      ssize_t len = ::readlink((from + n).c_str(), target.data(), target.size());
      if (len < 0 ||
          ::symlinkat(target.substr(0, static_cast<std::size_t>(len)).c_str(), dir, n.c_str()) != 0)
        return failure(cat("cannot recreate the link /tmp/", n));
      continue;
    }
    bool made =
        S_ISDIR(st.st_mode)
            ? ::mkdirat(dir, n.c_str(), 0700) == 0
            : UniqueFd(::openat(dir, n.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600))
                      .get() >= 0;
    if (!made) return failure(cat("cannot bind /tmp/", n));
    if (::mount((from + n).c_str(), ("/tmp/" + n).c_str(), nullptr, MS_BIND | MS_REC, nullptr) !=
        0) {
      if (errno != ENOENT) return failure(cat("cannot bind /tmp/", n));
      ::unlinkat(dir, n.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);  // gone meanwhile
    }
  }
  return {};
}

std::vector<std::string> list(const char* path) {
  std::vector<std::string> names;
  DIR* d = ::opendir(path);
  if (!d) return names;
  while (const dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  ::closedir(d);
  return names;
}

// The private /tmp, once in the namespace: a tmpfs, the real /tmp's entries bound back (from a copy
// of it attached aside, then taken away), `source` at /tmp/<name>.
Expected<void> populate(const std::string& name, int old, int source,
                        std::vector<std::string> names) {
  std::string aside = ".kiln-real-tmp";
  while (std::find(names.begin(), names.end(), aside) != names.end()) aside += "_";
  UniqueFd dir(::open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0) return failure("cannot open the private /tmp");
  if (::mkdirat(dir.get(), aside.c_str(), 0700) != 0 || !attach(old, dir.get(), aside.c_str()))
    return failure("cannot attach the real /tmp aside");
  auto bound = bind_back(aside, dir.get(), names);
  ::umount2(("/tmp/" + aside).c_str(), MNT_DETACH);
  ::unlinkat(dir.get(), aside.c_str(), AT_REMOVEDIR);
  KILN_CHECK(bound);
  if (::mkdirat(dir.get(), name.c_str(), 0755) != 0 || !attach(source, dir.get(), name.c_str()))
    return failure(cat("cannot bind /tmp/", name));
  return {};
}

}  // namespace

Expected<void> enter_private_tmp(const std::string& name, const fs::path& source) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
    return Error::failed(cat("'", name, "' is not a plain name"));
  if (std::size_t n = thread_count(); n != 1)
    return Error::failed(cat("the process has ", n, " threads (a namespace of its own needs one)"));
  const uid_t uid = ::geteuid();
  const gid_t gid = ::getegid();
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  KILN_CHECK(probe(uid, gid));
  if (int err = unshare_mounts(uid, gid); err != 0)
    return failure("cannot make a mount namespace", err);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return failure("cannot make mounts private");
  // Detached copies of the real /tmp and of the source, and the real /tmp's entries, taken before
  // /tmp is covered.
  UniqueFd old(
      open_tree_call(AT_FDCWD, "/tmp", OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC));
  UniqueFd src(
      open_tree_call(AT_FDCWD, source.c_str(), OPEN_TREE_CLONE | AT_RECURSIVE | OPEN_TREE_CLOEXEC));
  if (old.get() < 0 || src.get() < 0)
    return failure(cat("cannot take a copy of /tmp or ", source.string()));
  std::vector<std::string> names = list("/tmp");
  std::erase(names, name);
  if (names.size() > kMaxTmpEntries)
    return Error::failed(cat("/tmp holds ", names.size(), " entries, more than the ",
                             kMaxTmpEntries, " kiln binds back"));
  if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    return failure("cannot mount a tmpfs on /tmp");
  if (auto done = populate(name, old.get(), src.get(), std::move(names)); !done) {
    ::umount2("/tmp", MNT_DETACH);  // the real /tmp again, as it was
    return done;
  }
  if (!cwd.empty() && ::chdir(cwd.c_str()) != 0 && ::chdir("/") != 0)
    return failure("cannot enter the working directory");
  return {};
}

}  // namespace kiln
