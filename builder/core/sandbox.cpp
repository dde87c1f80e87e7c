#include "core/sandbox.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"

extern char** environ;

namespace kiln {

namespace fs = std::filesystem;

namespace {

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x00000001
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

// mount_setattr(2)'s argument (linux/mount.h), for headers older than it.
struct MountAttr {
  std::uint64_t attr_set, attr_clr, propagation, userns_fd;
};

constexpr std::uint32_t kNobody = 65534;  // the id every command runs as, inside
constexpr int kHelperFailed = 125;        // the sandbox could not be made (as env(1), podman)
constexpr int kCannotRun = 127;           // the command could not be started

// Directories the host's system lives in: bound read-only when directories, made again when links
// (merged /usr: /bin -> usr/bin).
constexpr const char* kSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};
// What tools need from /etc to start: the dynamic linker's cache and configuration, the
// alternatives system's links (Debian's cc, c++, python3…).
constexpr const char* kEtc[] = {"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
                                "/etc/alternatives"};
constexpr const char* kDevices[] = {"null", "zero", "full", "random", "urandom", "tty"};
// Where the new root is assembled: the first of these that exists and holds none of the binds'
// sources (a tmpfs is mounted over it in this process's namespace alone).
constexpr const char* kBases[] = {"/dev/shm", "/run", "/mnt", "/srv", "/media"};

struct Args {
  std::vector<std::string> ro, rw, keep, argv;
  SandboxLimits limits;
};

// Who the command runs as: kNobody inside, mapped to `outside` in kiln's own user namespace. Root
// lends it the id nobody has there; anyone else (or a root whose namespace maps only itself) has
// only its own id to give, which is no privilege outside.
struct Identity {
  uid_t uid;
  gid_t gid;
  bool privileged;  // kiln is root and maps nobody: supplementary groups are dropped too
};

[[noreturn]] void die(const std::string& what, int err = errno) {
  std::string line = cat("kiln sandbox: ", what, err ? cat(": ", std::strerror(err)) : "", "\n");
  (void)!::write(2, line.data(), line.size());
  ::_exit(kHelperFailed);
}

// "processes=N", "files=N", "file-size=BYTES" (a positive count).
void parse_limit(const std::string& text, SandboxLimits& limits) {
  auto eq = text.find('=');
  std::string name = text.substr(0, eq == std::string::npos ? text.size() : eq);
  std::uint64_t value = 0;
  std::string_view digits = eq == std::string::npos ? "" : std::string_view(text).substr(eq + 1);
  bool ok = !digits.empty() && digits.size() <= 19 &&
            std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (ok) value = std::stoull(std::string(digits));
  if (!ok || value == 0) die(cat("'", text, "' is not a limit (NAME=a positive number)"), 0);
  if (name == "processes")
    limits.processes = value;
  else if (name == "files")
    limits.files = value;
  else if (name == "file-size")
    limits.file_size = value;
  else
    die(cat("unknown limit '", name, "'"), 0);
}

Args parse(int argc, char** argv) {
  Args a;
  int i = 2;
  for (; i < argc; ++i) {
    std::string_view opt = argv[i];
    if (opt == "--") break;
    if (i + 1 >= argc) die(cat("'", opt, "' needs a value"), 0);
    std::string value = argv[++i];
    if (opt == "--ro")
      a.ro.push_back(value);
    else if (opt == "--rw")
      a.rw.push_back(value);
    else if (opt == "--keep")
      a.keep.push_back(value);
    else if (opt == "--limit")
      parse_limit(value, a.limits);
    else
      die(cat("unknown option '", opt, "'"), 0);
  }
  for (++i; i < argc; ++i) a.argv.emplace_back(argv[i]);
  if (a.argv.empty()) die("no command", 0);
  for (const auto& p : a.ro)
    if (p.empty() || p[0] != '/') die(cat("'", p, "' is not an absolute path"), 0);
  for (const auto& p : a.rw)
    if (p.empty() || p[0] != '/') die(cat("'", p, "' is not an absolute path"), 0);
  return a;
}

bool write_proc(const char* path, const std::string& text) {
  UniqueFd fd(::open(path, O_WRONLY | O_CLOEXEC));
  return fd.get() >= 0 &&
         ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0 ||
      ::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
    die(cat("cannot write ", path));
}

// mkdir -p of `path`, every new directory 0755.
void make_dirs(const std::string& path) {
  std::string at;
  for (const auto& part : split(path, "/")) {
    at += "/" + part;
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST) die(cat("cannot create ", at));
  }
}

// Mount flags a read-only remount must keep (a user namespace may not drop them).
unsigned long locked_flags(const std::string& path) {
  struct statvfs v {};
  if (::statvfs(path.c_str(), &v) != 0) return 0;
  unsigned long f = 0;
  if (v.f_flag & ST_NOSUID) f |= MS_NOSUID;
  if (v.f_flag & ST_NODEV) f |= MS_NODEV;
  if (v.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
  if (v.f_flag & ST_NOATIME) f |= MS_NOATIME;
  if (v.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
  if (v.f_flag & ST_RELATIME) f |= MS_RELATIME;
  return f;
}

// Binds the host's `source` at `target` (inside the new root): recursively and read-only with the
// kernel's mount_setattr, else (before Linux 5.12) the mount alone, remounted read-only.
void bind_mount(const std::string& source, const std::string& target, bool writable) {
  struct stat st {};
  if (::stat(source.c_str(), &st) != 0) die(cat("cannot bind ", source));
  if (S_ISDIR(st.st_mode)) {
    make_dirs(target);
  } else {
    make_dirs(fs::path(target).parent_path().string());
    UniqueFd fd(::open(target.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (fd.get() < 0) die(cat("cannot create ", target));
  }
  if (writable) {
    if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0)
      die(cat("cannot bind ", source));
    return;
  }
  MountAttr attr{MOUNT_ATTR_RDONLY, 0, 0, 0};
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND | MS_REC, nullptr) == 0 &&
      ::syscall(SYS_mount_setattr, AT_FDCWD, target.c_str(), AT_RECURSIVE, &attr, sizeof attr) == 0)
    return;
  if (errno != ENOSYS) die(cat("cannot bind ", source, " read-only"));
  ::umount2(target.c_str(), MNT_DETACH);
  if (::mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, target.c_str(), nullptr,
              MS_REMOUNT | MS_BIND | MS_RDONLY | locked_flags(source), nullptr) != 0)
    die(cat("cannot bind ", source, " read-only"));
}

// Makes `path` resolve inside the new root as it does outside: every link on its way that the new
// root lacks (it is in none of the binds: a cache reached through a link, /usr/local/cuda outside
// /usr) is made again there, and followed. The binds hold only real paths.
void mirror_links(const std::string& root, const std::string& path, int depth = 0) {
  if (depth > 40) die(cat("too many links on the way to ", path), 0);
  std::vector<std::string> parts = split(path, "/");
  std::string at;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    std::string next = at + "/" + parts[i];
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0) return;  // missing outside: nothing to mirror
    if (S_ISLNK(st.st_mode)) {
      std::string to(4096, '\0');
      ssize_t n = ::readlink(next.c_str(), to.data(), to.size() - 1);
      if (n <= 0) die(cat("cannot read the link ", next));
      to.resize(static_cast<std::size_t>(n));
      struct stat inside_st {};
      if (::lstat((root + next).c_str(), &inside_st) != 0) {
        make_dirs(root + at);
        if (::symlink(to.c_str(), (root + next).c_str()) != 0) die(cat("cannot link ", next));
      }
      std::string rest;
      for (std::size_t j = i + 1; j < parts.size(); ++j) rest += "/" + parts[j];
      std::string target = to.starts_with("/") ? to : cat(at.empty() ? "" : at, "/", to);
      return mirror_links(root, fs::path(target + rest).lexically_normal().string(), depth + 1);
    }
    at = next;
  }
}

bool inside(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.starts_with(dir) &&
                         (dir == "/" || path[dir.size()] == '/'));
}

std::string choose_base(const Args& a) {
  for (const char* base : kBases) {
    struct stat st {};
    if (::lstat(base, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    bool used = false;
    for (const auto* list : {&a.ro, &a.rw})
      for (const auto& p : *list) used = used || inside(p, base) || inside(base, p);
    if (!used) return base;
  }
  die("no directory to assemble the sandbox in (/dev/shm, /run, /mnt, /srv, /media)", 0);
}

// /dev: a tmpfs of the host's harmless devices, bound, and the usual links.
void make_dev(const std::string& root) {
  const std::string dev = root + "/dev";
  make_dirs(dev);
  if (::mount("tmpfs", dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") != 0)
    die("cannot mount /dev");
  for (const char* name : kDevices) {
    std::string host = cat("/dev/", name), target = cat(dev, "/", name);
    struct stat st {};
    if (::stat(host.c_str(), &st) != 0) continue;
    write_file(target, "", 0666);
    if (::mount(host.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0)
      die(cat("cannot bind ", host));
  }
  for (const auto& [name, to] :
       std::vector<std::pair<std::string, std::string>>{{"fd", "/proc/self/fd"},
                                                        {"stdin", "/proc/self/fd/0"},
                                                        {"stdout", "/proc/self/fd/1"},
                                                        {"stderr", "/proc/self/fd/2"}})
    if (::symlink(to.c_str(), cat(dev, "/", name).c_str()) != 0)
      die(cat("cannot link /dev/", name));
  if (::mkdir(cat(dev, "/shm").c_str(), 01777) != 0 ||
      ::chmod(cat(dev, "/shm").c_str(), 01777) != 0)
    die("cannot create /dev/shm");
}

// /etc: the linker's files and the alternatives bound, a passwd and a group of kiln's.
void make_etc(const std::string& root) {
  make_dirs(root + "/etc");
  for (const char* path : kEtc) {
    struct stat st {};
    if (::stat(path, &st) == 0) bind_mount(path, root + path, false);
  }
  write_file(root + "/etc/passwd",
             cat("root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:", kNobody, ":", kNobody,
                 ":nobody:/tmp/home:/bin/sh\n"),
             0644);
  write_file(root + "/etc/group", cat("root:x:0:\nnogroup:x:", kNobody, ":\n"), 0644);
}

// The host's system directories: bound when directories, made again when links.
void make_system(const std::string& root) {
  for (const char* path : kSystem) {
    struct stat st {};
    if (::lstat(path, &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::string to(4096, '\0');
      ssize_t n = ::readlink(path, to.data(), to.size() - 1);
      if (n < 0 ||
          ::symlink(to.substr(0, static_cast<std::size_t>(n)).c_str(), (root + path).c_str()) != 0)
        die(cat("cannot make the link ", path));
    } else if (S_ISDIR(st.st_mode)) {
      bind_mount(path, root + path, false);
    }
  }
}

// No capability to be had by exec: the bounding set emptied (while CAP_SETPCAP is held).
void empty_bounding_set(int last_cap) {
  for (int cap = 0; cap <= last_cap; ++cap)
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
      die("cannot empty the capability bounding set");
}

// nobody, for good: no supplementary group (root's would still open files of its groups), then
// the group and the user.
void become_nobody(bool privileged) {
  if (privileged && ::setgroups(0, nullptr) != 0) die("cannot drop the supplementary groups");
  if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, kNobody) != 0)
    die("cannot become nobody");
}

// The per-process limits of the command and what it starts.
void set_limits(const SandboxLimits& limits) {
  auto set = [](int resource, std::uint64_t value, const char* what) {
    struct rlimit now {};
    if (::getrlimit(resource, &now) != 0) die(cat("cannot read the limit on ", what));
    rlim_t v = static_cast<rlim_t>(value);
    if (now.rlim_max != RLIM_INFINITY && now.rlim_max < v) v = now.rlim_max;
    struct rlimit next {
      v, v
    };
    if (::setrlimit(resource, &next) != 0) die(cat("cannot limit ", what));
  };
  set(RLIMIT_NPROC, limits.processes, "processes");
  set(RLIMIT_NOFILE, limits.files, "open files");
  set(RLIMIT_FSIZE, limits.file_size, "the file size");
  set(RLIMIT_CORE, 1, "core dumps");  // 1 byte: none is written
}

// Every capability gone: none held, none to be had by exec (no_new_privs).
void drop_capabilities() {
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capset, &header, data) != 0) die("cannot drop capabilities");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("cannot set no_new_privs");
}

int last_capability() {
  std::ifstream in("/proc/sys/kernel/cap_last_cap");
  int last = 40;
  in >> last;
  return last > 0 && last < 64 ? last : 40;
}

// The environment inside: the kept variables, then HOME and TMPDIR.
std::vector<std::string> environment(const Args& a) {
  std::vector<std::string> env;
  bool path = false;
  for (const auto& name : a.keep) {
    if (name == "HOME" || name == "TMPDIR") continue;
    if (const char* v = std::getenv(name.c_str())) {
      env.push_back(cat(name, "=", v));
      path = path || name == "PATH";
    }
  }
  if (!path) env.emplace_back("PATH=/usr/bin:/bin");
  env.emplace_back("HOME=/tmp/home");
  env.emplace_back("TMPDIR=/tmp");
  return env;
}

// In the new namespaces, as their PID 1, once the helper has mapped the ids (a byte on `go`):
// the new root, then nobody, then the command.
[[noreturn]] void run_inside(const Args& a, const Identity& id, const std::string& cwd,
                             int last_cap, int go) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
  char byte = 0;
  while (::read(go, &byte, 1) < 0 && errno == EINTR) {
  }
  if (byte != 'g') ::_exit(kHelperFailed);  // the helper said why
  ::close(go);
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    die("cannot make mounts private");
  const std::string root = choose_base(a);
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
    die(cat("cannot mount the new root on ", root));
  make_system(root);
  make_etc(root);
  const std::string tmp = root + "/tmp";
  make_dirs(tmp);
  if (::mount("tmpfs", tmp.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    die("cannot mount /tmp");
  // Each path by its real path: a link on the way would otherwise lead the bind's target out of the
  // new root (a link inside resolves to that real path).
  std::vector<std::pair<std::string, bool>> binds;
  for (const auto* list : {&a.ro, &a.rw})
    for (const auto& p : *list) {
      char* real = ::realpath(p.c_str(), nullptr);
      if (!real) die(cat("cannot bind ", p));
      binds.emplace_back(real, list == &a.rw);
      std::free(real);
    }
  std::sort(binds.begin(), binds.end());  // a parent before what it holds
  for (const auto& [path, writable] : binds) bind_mount(path, root + path, writable);
  for (const auto* list : {&a.ro, &a.rw})
    for (const auto& p : *list) mirror_links(root, fs::path(p).lexically_normal().string());
  make_dev(root);
  make_dirs(root + "/proc");
  if (::mount("proc", (root + "/proc").c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0)
    die("cannot mount /proc");
  make_dirs(root + "/.old");
  if (::syscall(SYS_pivot_root, root.c_str(), (root + "/.old").c_str()) != 0)
    die("cannot enter the new root");
  if (::chdir("/") != 0 || ::umount2("/.old", MNT_DETACH) != 0 || ::rmdir("/.old") != 0)
    die("cannot leave the old root");
  if (::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              nullptr) != 0)
    die("cannot make the new root read-only");
  (void)::sethostname("kiln", 4);
  if (::chdir(cwd.c_str()) != 0) die(cat("cannot enter ", cwd, " in the sandbox"));
  empty_bounding_set(last_cap);
  become_nobody(id.privileged);
  if (::mkdir("/tmp/home", 0755) != 0) die("cannot create /tmp/home");
  set_limits(a.limits);
  std::vector<std::string> env = environment(a);
  drop_capabilities();
  std::vector<char*> argv, envp;
  for (const auto& s : a.argv) argv.push_back(const_cast<char*>(s.c_str()));
  for (const auto& s : env) envp.push_back(const_cast<char*>(s.c_str()));
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  environ = envp.data();
  ::execvp(argv[0], argv.data());
  std::string line = cat("kiln sandbox: cannot run ", a.argv[0], ": ", std::strerror(errno), "\n");
  (void)!::write(2, line.data(), line.size());
  ::_exit(kCannotRun);
}

// Whether `id` is mapped in this process's user namespace (its /proc/self/uid_map or gid_map).
bool mapped(const char* map, std::uint32_t id) {
  std::ifstream in(map);
  std::uint64_t inside = 0, outside = 0, count = 0;
  while (in >> inside >> outside >> count)
    if (id >= inside && id - inside < count) return true;
  return false;
}

Identity identity() {
  if (::getuid() == 0 && mapped("/proc/self/uid_map", kNobody) &&
      mapped("/proc/self/gid_map", kNobody))
    return {kNobody, kNobody, true};
  return {::getuid(), ::getgid(), false};
}

pid_t g_child = -1;

void kill_child(int) {
  if (g_child > 0) ::kill(g_child, SIGKILL);
}

// Outside the PID namespace: waits for the command and exits as it did.
[[noreturn]] void wait_outside(pid_t child) {
  g_child = child;
  struct sigaction sa {};
  sa.sa_handler = kill_child;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) die("waitpid");
  if (WIFEXITED(status)) ::_exit(WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
  ::_exit(128 + sig);
}

}  // namespace

std::optional<SandboxMode> parse_sandbox_mode(std::string_view text) {
  if (text == "auto") return SandboxMode::Auto;
  if (text == "required") return SandboxMode::Required;
  if (text == "off") return SandboxMode::Off;
  return std::nullopt;
}

std::vector<std::string> sandboxed(const SandboxSpec& spec,
                                   const std::vector<std::string>& command) {
  std::error_code ec;
  std::vector<std::string> argv = {fs::read_symlink("/proc/self/exe", ec).string(), "__sandbox"};
  for (const auto& p : spec.read_only) argv.insert(argv.end(), {"--ro", p.string()});
  for (const auto& p : spec.writable) argv.insert(argv.end(), {"--rw", p.string()});
  for (const auto& n : spec.keep_env) argv.insert(argv.end(), {"--keep", n});
  const SandboxLimits& l = spec.limits;
  for (const auto& [name, value] : {std::pair<const char*, std::uint64_t>{"processes", l.processes},
                                    {"files", l.files},
                                    {"file-size", l.file_size}})
    argv.insert(argv.end(), {"--limit", cat(name, "=", value)});
  argv.emplace_back("--");
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

const Expected<void>& sandbox_available() {
  static const Expected<void> available = []() -> Expected<void> {
    ProcessSpec spec;
    spec.argv = sandboxed({}, {"true"});
    spec.cwd = "/";
    auto r = run_process(spec);
    if (!r) return Error::failed(cat("cannot run the sandbox helper: ", r.error().message));
    if (r->ok()) return {};
    std::string why = std::string(trim(tail_lines(r->output, 1)));
    const std::string head = "kiln sandbox: ";
    if (why.starts_with(head)) why = why.substr(head.size());
    return Error::failed(why.empty() ? cat("the sandbox helper exited ", r->exit_code) : why);
  }();
  return available;
}

int sandbox_main(int argc, char** argv) {
  Args a = parse(argc, argv);
  const Identity id = identity();
  std::error_code ec;
  const std::string cwd = fs::current_path(ec).string();
  const int last_cap = last_capability();
  int go[2];
  if (::pipe2(go, O_CLOEXEC) != 0) die("pipe");
  // clone(2) rather than unshare(2): the ids of a user namespace made by a child can be mapped by
  // this process, which keeps kiln's own rights (root may map nobody; a child in its new namespace
  // may map only itself).
  long child = ::syscall(SYS_clone,
                         CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS |
                             CLONE_NEWPID | SIGCHLD,
                         nullptr, nullptr, nullptr, nullptr);
  if (child < 0) die("cannot make the namespaces (user, mount, network, IPC, UTS and PID)");
  if (child == 0) {
    ::close(go[1]);
    run_inside(a, id, cwd, last_cap, go[0]);
  }
  ::close(go[0]);
  const std::string proc = cat("/proc/", child, "/");
  if (!id.privileged) (void)write_proc((proc + "setgroups").c_str(), "deny");
  // Root keeps root mapped to itself for making the sandbox (a file system mounted inside takes
  // new files only from mapped ids), then becomes nobody for good.
  const std::string root = id.privileged ? "0 0 1\n" : "";
  if (!write_proc((proc + "uid_map").c_str(), cat(root, kNobody, " ", id.uid, " 1\n")) ||
      !write_proc((proc + "gid_map").c_str(), cat(root, kNobody, " ", id.gid, " 1\n"))) {
    int err = errno;
    ::kill(static_cast<pid_t>(child), SIGKILL);
    die(cat("cannot map nobody to ", id.uid, ":", id.gid, " in the user namespace"), err);
  }
  if (::write(go[1], "g", 1) != 1) die("cannot start the command");
  ::close(go[1]);
  wait_outside(static_cast<pid_t>(child));
}

namespace {

constexpr int kMaxTreeDepth = 256;

// Every entry of the directory `dir` (an open descriptor, on device `dev`) and under it owned by
// uid:gid; with `clear`, no set-user-ID or set-group-ID bit left. Links are changed, not followed.
Expected<void> chown_tree(int dir, dev_t dev, uid_t uid, gid_t gid, bool clear, int depth) {
  if (depth > kMaxTreeDepth) return Error::failed("a tree deeper than 256 directories");
  UniqueFd listing(::dup(dir));
  DIR* d = listing.get() >= 0 ? ::fdopendir(listing.get()) : nullptr;
  if (!d) return Error::failed(cat("cannot list a directory: ", std::strerror(errno)));
  listing.release();
  Expected<void> result;
  while (const dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st {};
    if (::fstatat(dir, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != dev) continue;
    if (::fchownat(dir, e->d_name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      result = Error::failed(cat("cannot change the owner of ", name, ": ", std::strerror(errno)));
      break;
    }
    const mode_t special = S_ISUID | S_ISGID;
    if (clear && !S_ISLNK(st.st_mode) && (st.st_mode & special) &&
        ::fchmodat(dir, e->d_name, st.st_mode & 07777 & ~special, 0) != 0) {
      result = Error::failed(cat("cannot clear the mode of ", name, ": ", std::strerror(errno)));
      break;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    UniqueFd sub(::openat(dir, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.get() < 0) continue;  // replaced since: not followed
    result = chown_tree(sub.get(), dev, uid, gid, clear, depth + 1);
    if (!result) break;
  }
  ::closedir(d);
  return result;
}

Expected<void> chown_root(const fs::path& root, uid_t uid, gid_t gid, bool clear) {
  UniqueFd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  struct stat st {};
  if (dir.get() < 0 || ::fstat(dir.get(), &st) != 0 || ::fchown(dir.get(), uid, gid) != 0)
    return Error::failed(
        cat("cannot change the owner of ", root.string(), ": ", std::strerror(errno)));
  auto done = chown_tree(dir.get(), st.st_dev, uid, gid, clear, 0);
  if (!done) return Error::failed(cat(root.string(), ": ", done.error().message));
  return {};
}

}  // namespace

// The roots on loan now (builds of several packages may run at once).
static std::mutex g_loans_mutex;
static std::vector<fs::path> g_loans;

Expected<TreeLoan> TreeLoan::lend(const fs::path& root) {
  auto to = sandbox_lends_to();
  if (!to) return TreeLoan({});
  TreeLoan loan(root);  // given back even when lending stops half-way
  {
    std::lock_guard<std::mutex> lock(g_loans_mutex);
    g_loans.push_back(root);
  }
  KILN_CHECK(chown_root(root, to->first, to->second, false));
  return loan;
}

TreeLoan::~TreeLoan() {
  (void)give_back();
}

Expected<void> TreeLoan::give_back() {
  if (root_.empty()) return {};
  fs::path root = std::exchange(root_, {});
  {
    std::lock_guard<std::mutex> lock(g_loans_mutex);
    auto at = std::find(g_loans.begin(), g_loans.end(), root);
    if (at != g_loans.end()) g_loans.erase(at);
  }
  return chown_root(root, ::getuid(), ::getgid(), true);
}

Expected<void> TreeLoan::lend_file(const fs::path& path) {
  auto to = sandbox_lends_to();
  if (!to) return {};
  {
    std::lock_guard<std::mutex> lock(g_loans_mutex);
    if (std::none_of(g_loans.begin(), g_loans.end(),
                     [&](const fs::path& root) { return path_within(path, root); }))
      return {};
  }
  if (::fchownat(AT_FDCWD, path.c_str(), to->first, to->second, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::failed(cat("cannot lend ", path.string(), ": ", std::strerror(errno)));
  return {};
}

std::optional<std::pair<uid_t, gid_t>> sandbox_lends_to() {
  Identity id = identity();
  if (!id.privileged) return std::nullopt;
  return std::pair<uid_t, gid_t>{id.uid, id.gid};
}

}  // namespace kiln
