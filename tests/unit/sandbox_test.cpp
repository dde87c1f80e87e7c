// core/sandbox: the helper run for real. The sandbox re-executes its own binary (/proc/self/exe)
// as `__sandbox`; this file lets the test binary be that helper too (before gtest's main runs).
// compile/sandbox: what a build's sandbox holds.
#include "core/sandbox.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "../support/expect.h"
#include "compile/backend.h"
#include "compile/sandbox.h"
#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"

namespace {

// When this binary is started as the helper: run it, never returning.
const bool kHelper = [] {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args = kiln::split(all, std::string_view("\0", 1), false);
  if (!args.empty() && args.back().empty()) args.pop_back();
  if (args.size() < 2 || args[1] != "__sandbox") return false;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(kiln::sandbox_main(static_cast<int>(args.size()), argv.data()));
}();

}  // namespace

namespace kiln {

namespace fs = std::filesystem;

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const auto& available = sandbox_available(); !available)
      GTEST_SKIP() << "no sandbox here: " << available.error().message;
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-sandbox-").value());
  }
  // Runs `script` with sh in a sandbox that has `spec`, from `cwd`, its writable paths lent to it
  // as a build lends its root; its output and status.
  ProcessResult run(const SandboxSpec& spec, const std::string& script, const fs::path& cwd) {
    std::vector<TreeLoan> loans;
    for (const auto& p : spec.writable) loans.push_back(TreeLoan::lend(p).value());
    ProcessSpec p;
    p.argv = sandboxed(spec, {"sh", "-c", script});
    p.cwd = cwd;
    auto result = run_process(p).value();
    for (auto& loan : loans) loan.give_back().value();
    return result;
  }
  std::optional<TempDir> dir_;
};

TEST_F(SandboxTest, SeesOnlyWhatItIsGivenAndWritesOnlyWhereItMay) {
  const fs::path work = dir_->path() / "work", ro = dir_->path() / "ro",
                 hidden = dir_->path() / "hidden";
  fs::create_directories(work);
  fs::create_directories(ro);
  fs::create_directories(hidden);
  std::ofstream(ro / "in.txt") << "input\n";
  std::ofstream(hidden / "secret") << "secret\n";
  fs::create_directory_symlink(ro, dir_->path() / "ro-link");  // a path given through a link
  SandboxSpec spec;
  spec.read_only = {dir_->path() / "ro-link"};
  spec.writable = {work};
  auto r = run(spec,
               "cat ro-link/in.txt; cat ../hidden/secret 2>/dev/null || echo no-secret; "
               "echo made > out.txt; (echo x > ../ro/new) 2>/dev/null || echo ro-refused; "
               "(echo x > /usr/kiln-x) 2>/dev/null || echo usr-refused; "
               "test -e /root/.bashrc || echo no-root; echo pid=$$; hostname; echo home=$HOME",
               "/var");
  EXPECT_EQ(r.exit_code, 125) << r.output;  // its working directory is not in the sandbox
  EXPECT_CONTAINS(r.output, "cannot enter /var in the sandbox");
  r = run(spec,
          "cat " + (dir_->path() / "ro-link/in.txt").string() + "; cat " +
              (hidden / "secret").string() +
              " 2>/dev/null || echo no-secret; echo made > out.txt; (echo x > " +
              (ro / "new").string() +
              ") 2>/dev/null || echo ro-refused; (echo x > /usr/kiln-x) 2>/dev/null || "
              "echo usr-refused; test -e /root/.bashrc || echo no-root; echo pid=$$; hostname; "
              "echo home=$HOME",
          work);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output,
            "input\nno-secret\nro-refused\nusr-refused\nno-root\npid=1\nkiln\nhome=/tmp/home\n");
  EXPECT_EQ(read_file(work / "out.txt").value(), "made\n");
  EXPECT_FALSE(fs::exists(ro / "new"));
}

// A read-only directory inside the writable one (a build root's logs/, which kiln writes and reads
// back): nothing in it can be written, and it cannot be moved aside or replaced with a link.
TEST_F(SandboxTest, AReadOnlyDirectoryInsideAWritableOneStaysAsItIs) {
  const fs::path root = dir_->path() / "root";
  fs::create_directories(root / "logs");
  std::ofstream(root / "logs" / "job.log") << "kiln's log\n";
  SandboxSpec spec;
  spec.writable = {root};
  spec.read_only = {root / "logs"};
  auto r = run(spec,
               "(echo x > logs/job.log) 2>/dev/null || echo write-refused; "
               "(rm -f logs/job.log) 2>/dev/null; test -f logs/job.log && echo still-there; "
               "(mv logs logs.old) 2>/dev/null || echo move-refused; "
               "(rm -rf logs) 2>/dev/null; test -d logs && echo dir-there; echo ok > mine",
               root);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "write-refused\nstill-there\nmove-refused\ndir-there\n");
  EXPECT_EQ(read_file(root / "logs" / "job.log").value(), "kiln's log\n");
  EXPECT_EQ(read_file(root / "mine").value(), "ok\n");
}

// Every command is nobody, with no supplementary group, within the limits it is given; the tree it
// wrote is the caller's again once given back, with no set-user-ID bit left.
TEST_F(SandboxTest, RunsAsNobodyWithinItsLimitsAndGivesItsTreeBack) {
  const fs::path root = dir_->path() / "root";
  fs::create_directories(root);
  SandboxSpec spec;
  spec.writable = {root};
  spec.limits.processes = 64;
  spec.limits.files = 256;
  spec.limits.file_size = 1 << 20;
  auto r = run(spec,
               "id -u; id -g; id -G; ulimit -p; ulimit -n; ulimit -f; echo x > made; "
               "chmod 4755 made; sh -c 'head -c 2000000 /dev/zero > big; true' 2>/dev/null; "
               "stat -c %s big; ls -n made | cut -d' ' -f3",
               root);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // ulimit -f counts 512-byte blocks: 1 MiB is 2048; a write past it stops at 1 MiB (SIGXFSZ).
  EXPECT_EQ(r.output, "65534\n65534\n65534\n64\n256\n2048\n1048576\n65534\n");
  struct stat st {};
  ASSERT_EQ(::lstat((root / "made").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_gid, ::getgid());
  EXPECT_EQ(st.st_mode & 07777, 0755u);  // set-user-ID cleared
  // A fork bomb stops at the process limit (the script's own loop is bounded).
  r = run(spec,
          "python3 -c 'import os, time\nn = 0\ntry:\n  for _ in range(200):\n"
          "    if os.fork() == 0: time.sleep(30); os._exit(0)\n    n += 1\n"
          "except OSError as e: print(\"stopped\", n, e.errno)'",
          root);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto words = split(std::string(trim(r.output)), " ");
  ASSERT_EQ(words.size(), 3u) << r.output;
  EXPECT_EQ(words[0], "stopped");
  EXPECT_LT(std::stoi(words[1]), 64) << r.output;
  EXPECT_EQ(words[2], "11");  // EAGAIN
}

TEST_F(SandboxTest, KeepsOnlyTheVariablesItIsToldAndNoCapability) {
  SandboxSpec spec;
  spec.writable = {dir_->path()};
  spec.keep_env = {"KILN_TEST_KEPT", "PATH"};
  ProcessSpec p;
  p.argv = sandboxed(spec, {"sh", "-c",
                            "echo kept=$KILN_TEST_KEPT secret=$AWS_SECRET_ACCESS_KEY; "
                            "grep -E '^Cap(Eff|Prm|Bnd)' /proc/self/status; "
                            "grep NoNewPrivs /proc/self/status"});
  p.cwd = dir_->path();
  p.env_set = {{"KILN_TEST_KEPT", "yes"}, {"AWS_SECRET_ACCESS_KEY", "hunter2"}};
  auto r = run_process(p).value();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_CONTAINS(r.output, "kept=yes secret=\n");
  EXPECT_CONTAINS(r.output,
                  "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
                  "CapBnd:\t0000000000000000\n");
  EXPECT_CONTAINS(r.output, "NoNewPrivs:\t1");
}

TEST_F(SandboxTest, HasNoNetworkAndExitsAsTheCommandDid) {
  SandboxSpec spec;
  spec.writable = {dir_->path()};
  auto r =
      run(spec, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '; exit 7", dir_->path());
  EXPECT_EQ(r.exit_code, 7);
  EXPECT_EQ(r.output, "lo\n");  // no interface but the loopback
  r = run(spec, "exec nonexistent-command-kiln", dir_->path());
  EXPECT_NE(r.exit_code, 0);
}

TEST(SandboxMode, ParsesTheThreeModes) {
  EXPECT_EQ(parse_sandbox_mode("auto"), SandboxMode::Auto);
  EXPECT_EQ(parse_sandbox_mode("required"), SandboxMode::Required);
  EXPECT_EQ(parse_sandbox_mode("off"), SandboxMode::Off);
  EXPECT_FALSE(parse_sandbox_mode("Auto"));
  EXPECT_FALSE(parse_sandbox_mode(""));
}

TEST(BuildSandbox, OffSaysSoAndACcacheCompilerIsRefused) {
  compile::CompileBasics b;
  b.sandbox = SandboxMode::Off;
  auto off = compile::build_sandbox(b, {}, {}).value();
  EXPECT_FALSE(off.spec);
  EXPECT_EQ(off.caveat, "not sandboxed: KILN_SANDBOX=off");
  EXPECT_TRUE(compile::says_not_sandboxed({"x", off.caveat}));
  EXPECT_FALSE(compile::says_not_sandboxed({"nvcc ran outside a PID namespace"}));
  if (!sandbox_available()) GTEST_SKIP() << "no sandbox here";
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-sandbox-").value();
  fs::create_directories(dir.path() / "bin");
  std::ofstream(dir.path() / "bin" / "ccache") << "#!/bin/sh\n";
  fs::create_symlink(dir.path() / "bin" / "ccache", dir.path() / "bin" / "g++");
  b.sandbox = SandboxMode::Auto;
  b.root = dir.path();
  b.cxx.path = (dir.path() / "bin" / "g++").string();
  auto refused = compile::build_sandbox(b, {}, {});
  ASSERT_FALSE(refused);
  EXPECT_CONTAINS(refused.error().message, "is ccache's wrapper");
  // A compiler outside the system directories: its installation is held, read-only; the build
  // root is the one writable path, its logs/ (kiln's) read-only.
  fs::remove(dir.path() / "bin" / "g++");
  std::ofstream(dir.path() / "bin" / "g++") << "#!/bin/sh\n";
  auto spec = compile::build_sandbox(b, "/usr/include", {}).value().spec.value();
  EXPECT_EQ(spec.writable, std::vector<fs::path>{dir.path()});
  EXPECT_EQ(spec.read_only, (std::vector<fs::path>{dir.path() / "logs", dir.path()}));
}

}  // namespace kiln
