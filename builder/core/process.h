// Subprocesses from argv vectors only (posix_spawn), never shell strings.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "core/expected.h"

namespace kiln {

struct ProcessSpec {
  // Capture: stdout and stderr together; CaptureStdout: stdout, stderr goes to this process's.
  enum class Output { Capture, CaptureStdout, Log, Inherit, Discard };

  std::vector<std::string> argv;
  std::filesystem::path cwd;  // empty: the current directory
  std::vector<std::pair<std::string, std::string>> env_set;
  std::vector<std::string> env_unset;
  Output output = Output::Capture;  // stdout and stderr together
  // Capture, CaptureStdout: keep at most this many bytes of output (0: all); the rest is read and
  // dropped (ProcessResult::output_truncated), so a child cannot make this process grow.
  std::size_t max_output = 0;
  std::filesystem::path log_file;  // with Output::Log
  bool append_log = false;         // add to log_file instead of replacing it
  bool new_process_group = true;   // so an interrupt can stop the child and its children
  // Descriptors the child keeps open under the same numbers (all others are close-on-exec), e.g. a
  // lock it must hold for as long as it runs.
  std::vector<int> inherit_fds;
};

struct ProcessResult {
  int exit_code = -1;             // -1 when killed by a signal
  int term_signal = 0;            // the signal that ended it, or 0
  std::string output;             // with Output::Capture or CaptureStdout
  bool output_truncated = false;  // more than ProcessSpec::max_output bytes came
  double seconds = 0;
  double cpu_seconds = 0;  // user + system time of the child and the descendants it waited for
  long max_rss_kib = 0;
  bool ok() const { return exit_code == 0; }
};

class Child {
 public:
  Child(Child&& other) noexcept;
  Child& operator=(Child&&) = delete;
  ~Child();
  pid_t pid() const { return pid_; }
  // The child's process group (its pid when spawned with new_process_group), kept after it ends:
  // its own children may outlive it.
  pid_t process_group() const { return group_ ? pgid_ : -1; }
  Expected<ProcessResult> wait();
  // Non-blocking: a result when the child has ended, nothing yet otherwise.
  bool poll(ProcessResult& result);
  void kill_group(int signal);

 private:
  friend Expected<Child> spawn(const ProcessSpec& spec);
  Child(pid_t pid, int out_fd, bool group, std::size_t max_output);
  ProcessResult finish(int status, const ::rusage& usage);
  pid_t pid_ = -1;
  pid_t pgid_ = -1;
  int out_fd_ = -1;
  bool group_ = false;
  double start_ = 0;
  std::string output_;
  std::size_t max_output_ = 0;
  bool truncated_ = false;
};

Expected<Child> spawn(const ProcessSpec& spec);
Expected<ProcessResult> run_process(const ProcessSpec& spec);

// Runs argv, returns its output (stdout+stderr); a non-zero exit is an error naming the command.
Expected<std::string> run_capture(const std::vector<std::string>& argv);

// ["unshare", <flags>..., "--"] when this process may create those namespaces (tried once per
// set of flags by running `true` in them), else empty: a prefix for argv vectors.
std::vector<std::string> unshare_prefix(const std::vector<std::string>& flags);

// The full path of `name` on PATH (or `name` itself when it holds a '/'), or empty; a PATH
// directory that is `except` (compared canonically) is passed over.
std::filesystem::path find_program(const std::string& name,
                                   const std::filesystem::path& except = {});

// "cmd arg 'arg with space'": for logs and error messages.
std::string format_argv(const std::vector<std::string>& argv);

// The last `lines` lines of a text.
std::string tail_lines(const std::string& text, std::size_t lines);

}  // namespace kiln
