// The sandbox every process that runs or compiles a package's code runs in (docs/reliability.md,
// "The sandbox"). kiln runs the command through itself, re-executed as a single-threaded helper
// (`kiln __sandbox …`, before any thread or namespace of kiln's own), which makes:
//   - a user namespace, made by a child of the helper (clone) whose ids the helper maps: inside,
//     every command runs as nobody (65534:65534), no supplementary group, not a single capability
//     and no way to get one (no_new_privs); outside, that is nobody too where kiln is root (not
//     root mapped to root: root-only files stay closed, and RLIMIT_NPROC holds), else kiln's own
//     user;
//   - a mount namespace whose root is a fresh tmpfs holding only: read-only binds of /usr (and
//     /bin, /sbin, /lib* as the host has them: directories bound, links made again) and of the
//     paths the caller names (at their own paths: they reach objects and object keys), the
//     writable paths the caller names (a build root), from /etc only ld.so.cache, ld.so.conf(.d)
//     and alternatives/ plus a passwd and group of kiln's, a fresh /tmp, a /dev of null, zero,
//     full, random, urandom and tty, a /proc of its own; the root itself read-only;
//   - a network namespace (no interface but a loopback that is down), IPC and UTS namespaces (host
//     name "kiln");
//   - a PID namespace whose PID 1 is the command itself (cudafe++ names anonymous namespaces after
//     its process id: nvcc keeps its id from run to run, as under `unshare --pid --fork`);
//   - an environment of exactly the variables the caller keeps, with HOME and TMPDIR inside;
//   - limits on processes, open files and file size (SandboxLimits), and no core dump.
// The helper stays outside the PID namespace, waits for the command, passes SIGINT and SIGTERM on
// as SIGKILL, and exits as the command did.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.h"

namespace kiln {

// Where a build runs a package's code (KILN_SANDBOX, the configuration's `sandbox`,
// `kiln build --sandbox`).
enum class SandboxMode {
  Auto,      // sandboxed where namespaces may be made; else a warning and the caveat
  Required,  // sandboxed, or the build fails naming what was denied
  Off,       // never (the caveat says so)
};
// "auto", "required", "off"; nullopt for anything else.
std::optional<SandboxMode> parse_sandbox_mode(std::string_view text);

// Per process of the sandbox (setrlimit; processes are counted per sandbox, by the kernel's
// per-user-namespace counts of Linux 5.14 and later). Core dumps: none.
struct SandboxLimits {
  std::uint64_t processes = 4096;                     // RLIMIT_NPROC: a fork bomb stops here
  std::uint64_t files = 65536;                        // RLIMIT_NOFILE
  std::uint64_t file_size = std::uint64_t(32) << 30;  // RLIMIT_FSIZE: a runaway write stops here
};

struct SandboxSpec {
  std::vector<std::filesystem::path> read_only;  // absolute; bound at their own paths
  std::vector<std::filesystem::path> writable;   // absolute; bound at their own paths
  std::vector<std::string> keep_env;             // names of variables passed in
  SandboxLimits limits;
};

// The argv that runs `command` in the sandbox `spec` describes.
std::vector<std::string> sandboxed(const SandboxSpec& spec,
                                   const std::vector<std::string>& command);

// Whether a sandbox can be made here, tried once per process (a helper that runs /bin/true, or
// /usr/bin/true); the error says what was denied.
const Expected<void>& sandbox_available();

// The ids the sandbox's commands have outside, when they are not kiln's own: kiln is root, and
// they run as nobody (65534:65534). Paths they must write (a build root) are theirs for the build
// (lend_tree). nullopt: they run as kiln's own user, mapped to nobody inside.
std::optional<std::pair<uid_t, gid_t>> sandbox_lends_to();

// A tree the sandbox's commands write (a build root), theirs while the loan lasts: every entry
// under it (links themselves, never followed; nothing on another file system) owned by the ids
// sandbox_lends_to() names, then kiln's again, with set-user-ID and set-group-ID bits cleared,
// when the loan is given back (or dies). Nothing to lend where the commands run as kiln's user.
class TreeLoan {
 public:
  static Expected<TreeLoan> lend(const std::filesystem::path& root);
  TreeLoan(TreeLoan&& other) noexcept : root_(std::exchange(other.root_, {})) {}
  TreeLoan& operator=(TreeLoan&&) = delete;
  ~TreeLoan();
  Expected<void> give_back();
  // A file kiln itself writes into a tree on loan (a job's input that a later job of the sandbox
  // writes over): the borrower's too. Nothing where no loan holds `path`.
  static Expected<void> lend_file(const std::filesystem::path& path);

 private:
  explicit TreeLoan(std::filesystem::path root) : root_(std::move(root)) {}
  std::filesystem::path root_;  // empty: nothing lent
};

// The helper: argv[1] is "__sandbox". Returns the exit status for main() (never returns once the
// command runs: the helper exits as it does).
int sandbox_main(int argc, char** argv);

}  // namespace kiln
