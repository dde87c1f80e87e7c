#include "core/process.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "core/strings.h"

extern char** environ;

namespace kiln {

namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

bool shell_chdir_forced = false;

// posix_spawn_file_actions_addchdir_np is glibc 2.29's and the portable build links against 2.28
// (docs/portable.md), so it is looked up when kiln runs; null on an older glibc.
using AddChdir = int (*)(posix_spawn_file_actions_t*, const char*);
AddChdir add_chdir() {
  static const auto found =
      reinterpret_cast<AddChdir>(::dlsym(RTLD_DEFAULT, "posix_spawn_file_actions_addchdir_np"));
  return shell_chdir_forced ? nullptr : found;
}

// The child's working directory: through posix_spawn where glibc has it, else by /bin/sh, which
// changes directory and execs the command (a missing program is then exit 127, not an error).
void set_child_cwd(posix_spawn_file_actions_t& actions, const std::filesystem::path& cwd,
                   std::vector<std::string>& args) {
  if (cwd.empty()) return;
  if (AddChdir fn = add_chdir()) {
    fn(&actions, cwd.c_str());
    return;
  }
  args.insert(args.begin(), {"/bin/sh", "-c", "cd -- \"$0\" && exec \"$@\"", cwd.string()});
}

// Each inherited descriptor reaches the child without close-on-exec: dup2 from a close-on-exec
// copy (dup2 onto itself would need glibc 2.29). Returns the copies, for the parent to close.
std::vector<int> pass_fds(posix_spawn_file_actions_t& actions, const std::vector<int>& fds) {
  std::vector<int> copies;
  for (int fd : fds) {
    int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) continue;  // not open: the child will not have it either
    posix_spawn_file_actions_adddup2(&actions, copy, fd);
    copies.push_back(copy);
  }
  return copies;
}

std::vector<std::string> build_environment(const ProcessSpec& spec) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    auto eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& name : spec.env_unset) env.erase(name);
  for (const auto& [name, value] : spec.env_set) env[name] = value;
  std::vector<std::string> out;
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

// Reads to EOF; keeps at most `max` bytes in `out` (0: no limit) and says when it dropped some.
void read_available(int fd, std::string& out, std::size_t max, bool& truncated) {
  char buffer[65536];
  while (true) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      std::size_t take = static_cast<std::size_t>(n);
      if (max && out.size() + take > max) {
        take = max - out.size();
        truncated = true;
      }
      out.append(buffer, take);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
}

}  // namespace

std::string format_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> quoted;
  for (const auto& a : argv) quoted.push_back(shell_quote(a));
  return join(quoted, " ");
}

std::string tail_lines(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (std::size_t n = 0; n < lines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos == 0 ? 0 : pos + 1);
}

std::vector<std::string> unshare_prefix(const std::vector<std::string>& flags) {
  static std::mutex mutex;
  static std::map<std::vector<std::string>, std::vector<std::string>> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(flags); it != known.end()) return it->second;
  std::vector<std::string> prefix = {"unshare"};
  prefix.insert(prefix.end(), flags.begin(), flags.end());
  prefix.push_back("--");
  ProcessSpec probe;
  probe.argv = prefix;
  probe.argv.push_back("true");
  probe.output = ProcessSpec::Output::Discard;
  auto r = run_process(probe);
  if (!r || !r->ok()) prefix.clear();
  known.emplace(flags, prefix);
  return prefix;
}

std::filesystem::path find_program(const std::string& name, const std::filesystem::path& except) {
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  const char* path = std::getenv("PATH");
  if (!path) return {};
  for (const auto& dir : split(path, ":")) {
    std::error_code ec;
    if (!except.empty() && std::filesystem::canonical(dir, ec) == except) continue;
    std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0 && !std::filesystem::is_directory(candidate, ec))
      return candidate;
  }
  return {};
}

Child::Child(pid_t pid, int out_fd, bool group, std::size_t max_output)
    : pid_(pid),
      pgid_(pid),
      out_fd_(out_fd),
      group_(group),
      start_(now_seconds()),
      max_output_(max_output) {}

Child::Child(Child&& other) noexcept
    : pid_(other.pid_),
      pgid_(other.pgid_),
      out_fd_(other.out_fd_),
      group_(other.group_),
      start_(other.start_),
      output_(std::move(other.output_)),
      max_output_(other.max_output_),
      truncated_(other.truncated_) {
  other.pid_ = -1;
  other.out_fd_ = -1;
}

Child::~Child() {
  if (out_fd_ >= 0) ::close(out_fd_);
  if (pid_ > 0) {  // never leave a zombie or a runaway child behind
    kill_group(SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
}

void Child::kill_group(int signal) {
  if (pid_ <= 0) return;
  if (group_) ::kill(-pid_, signal);
  ::kill(pid_, signal);
}

ProcessResult Child::finish(int status, const ::rusage& usage) {
  ProcessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  result.seconds = now_seconds() - start_;
  result.max_rss_kib = usage.ru_maxrss;
  result.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                       static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  if (out_fd_ >= 0) {
    read_available(out_fd_, output_, max_output_, truncated_);
    ::close(out_fd_);
    out_fd_ = -1;
  }
  result.output = std::move(output_);
  result.output_truncated = truncated_;
  pid_ = -1;
  return result;
}

Expected<ProcessResult> Child::wait() {
  if (out_fd_ >= 0)
    read_available(out_fd_, output_, max_output_,
                   truncated_);  // until EOF: the child closed its end
  int status = 0;
  ::rusage usage{};
  while (::wait4(pid_, &status, 0, &usage) < 0) {
    if (errno != EINTR) return Error::failed(cat("waitpid failed: ", std::strerror(errno)));
  }
  return finish(status, usage);
}

bool Child::poll(ProcessResult& result) {
  int status = 0;
  ::rusage usage{};
  pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
  if (r != pid_) return false;
  result = finish(status, usage);
  return true;
}

Expected<Child> spawn(const ProcessSpec& spec) {
  if (spec.argv.empty()) return Error::failed("empty command");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
  if (spec.new_process_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, flags);

  int pipe_fds[2] = {-1, -1};
  auto cleanup = [&] {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  };
  switch (spec.output) {
    case ProcessSpec::Output::Capture:
      if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        cleanup();
        return Error::failed(cat("pipe failed: ", std::strerror(errno)));
      }
      posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
      posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
      break;
    case ProcessSpec::Output::CaptureStdout:
      if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        cleanup();
        return Error::failed(cat("pipe failed: ", std::strerror(errno)));
      }
      posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
      break;
    case ProcessSpec::Output::Log:
      posix_spawn_file_actions_addopen(&actions, 1, spec.log_file.c_str(),
                                       O_WRONLY | O_CREAT | (spec.append_log ? O_APPEND : O_TRUNC),
                                       0644);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      break;
    case ProcessSpec::Output::Discard:
      posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
      posix_spawn_file_actions_adddup2(&actions, 1, 2);
      break;
    case ProcessSpec::Output::Inherit:
      break;
  }
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<int> copies = pass_fds(actions, spec.inherit_fds);
  std::vector<std::string> args = spec.argv;
  set_child_cwd(actions, spec.cwd, args);

  std::vector<std::string> env = build_environment(spec);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argvp;
  for (auto& a : args) argvp.push_back(a.data());
  argvp.push_back(nullptr);

  // Resolve the program against the child's PATH (env_set may change it).
  std::string program = args[0];
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argvp.data(), envp.data());
  cleanup();
  for (int copy : copies) ::close(copy);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (rc != 0) {
    if (pipe_fds[0] >= 0) ::close(pipe_fds[0]);
    return Error::failed(cat("cannot run ", program, ": ", std::strerror(rc)));
  }
  return Child(pid, pipe_fds[0], spec.new_process_group, spec.max_output);
}

// For tests (declared there): the /bin/sh route a glibc older than 2.29 takes.
void force_shell_chdir_for_tests(bool on) {
  shell_chdir_forced = on;
}

Expected<ProcessResult> run_process(const ProcessSpec& spec) {
  KILN_TRY(Child child, spawn(spec));
  return child.wait();
}

Expected<std::string> run_capture(const std::vector<std::string>& argv) {
  ProcessSpec spec;
  spec.argv = argv;
  KILN_TRY(ProcessResult result, run_process(spec));
  if (!result.ok()) {
    return Error::failed(cat("command failed (",
                             result.term_signal ? cat("signal ", result.term_signal)
                                                : cat("exit ", result.exit_code),
                             "): ", format_argv(argv)),
                         tail_lines(result.output, 20));
  }
  return std::move(result.output);
}

}  // namespace kiln
