#include "core/process.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "core/fs.h"
#include "core/lock.h"
#include "core/strings.h"

namespace kiln {
void force_shell_chdir_for_tests(bool on);  // core/process.cpp

TEST(Process, CapturesOutputAndExitCode) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = run_process(spec).value();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
}

TEST(Process, CapturesStdoutAloneWithinACap) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo out; echo err >/dev/null 2>&1; head -c 100000 /dev/zero"};
  spec.output = ProcessSpec::Output::CaptureStdout;
  spec.max_output = 1000;
  auto r = run_process(spec).value();
  EXPECT_EQ(r.exit_code, 0);  // the rest was read and dropped: the child never blocked
  EXPECT_EQ(r.output.size(), 1000u);
  EXPECT_EQ(r.output.substr(0, 4), "out\n");
  EXPECT_TRUE(r.output_truncated);
  spec.argv = {"sh", "-c", "echo out; echo err >&2"};
  spec.max_output = 0;
  r = run_process(spec).value();
  EXPECT_EQ(r.output, "out\n");  // stderr went to this process's stderr
  EXPECT_FALSE(r.output_truncated);
}

TEST(Process, ArgvIsNotShellSplit) {
  auto out = run_capture({"printf", "%s|", "a b", "$HOME"}).value();
  EXPECT_EQ(out, "a b|$HOME|");
}

TEST(Process, EnvironmentAndCwd) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-proc-").value();
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo $KILN_X; pwd"};
  spec.env_set = {{"KILN_X", "hello"}};
  spec.cwd = dir.path();
  auto r = run_process(spec).value();
  EXPECT_EQ(r.output, "hello\n" + fs::canonical(dir.path()).string() + "\n");
}

// On glibc 2.28 (the portable build's floor) the child changes directory through /bin/sh.
TEST(Process, CwdThroughTheShellAsOnGlibc228) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-proc-").value();
  fs::create_directories(dir.path() / "a dir; $(x)");
  force_shell_chdir_for_tests(true);
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo \"$0|$1\"; pwd", "one two", "'three'"};
  spec.cwd = dir.path() / "a dir; $(x)";
  auto r = run_process(spec).value();
  spec.cwd = dir.path() / "missing";
  auto missing = run_process(spec).value();
  force_shell_chdir_for_tests(false);
  EXPECT_EQ(r.output, "one two|'three'\n" + fs::canonical(dir.path()).string() + "/a dir; $(x)\n");
  EXPECT_FALSE(missing.ok());
}

TEST(Process, LogFileReceivesOutput) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-proc-").value();
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo logged"};
  spec.output = ProcessSpec::Output::Log;
  spec.log_file = dir.path() / "job.log";
  EXPECT_TRUE(run_process(spec).value().ok());
  EXPECT_EQ(read_file(spec.log_file).value(), "logged\n");
}

TEST(Process, FailureNamesTheCommand) {
  auto r = run_capture({"sh", "-c", "echo boom; exit 7"});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("exit 7"), std::string::npos);
  EXPECT_NE(r.error().detail.find("boom"), std::string::npos);
  EXPECT_FALSE(run_capture({"/nonexistent/program"}));
}

TEST(Process, KillGroupStopsChildren) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "sleep 30 & sleep 30; wait"};
  spec.output = ProcessSpec::Output::Discard;
  auto child = spawn(spec).value();
  child.kill_group(SIGTERM);
  auto r = child.wait().value();
  EXPECT_EQ(r.term_signal, SIGTERM);
  EXPECT_LT(r.seconds, 5);
}

TEST(Process, TailLines) {
  EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(tail_lines("a\nb", 5), "a\nb");
}

TEST(Process, FindProgramPassesOverTheExceptedDirectoryAndDirectories) {
  namespace fs = std::filesystem;
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-path-").value();
  const fs::path root = fs::canonical(dir.path());
  for (const char* d : {"dirs/tool", "own", "other"}) fs::create_directories(root / d);
  for (const char* d : {"own", "other"})
    write_file_atomic(root / d / "tool", "#!/bin/sh\n", 0755).value();
  fs::create_directory_symlink(root / "own", root / "link");
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  ::setenv(
      "PATH",
      cat((root / "dirs").string(), ":", (root / "link").string(), ":", (root / "other").string())
          .c_str(),
      1);
  EXPECT_EQ(find_program("tool"), root / "link" / "tool");  // a directory named tool is not it
  EXPECT_EQ(find_program("tool", root / "own"), root / "other" / "tool");  // through the link too
  EXPECT_EQ(find_program("tool", root / "other"), root / "link" / "tool");
  ::setenv("PATH", saved.c_str(), 1);
}

}  // namespace kiln

namespace kiln {

TEST(Process, InheritedDescriptorKeepsALockUntilTheChildExits) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-process-").value();
  fs::path lock_path = dir.path() / "root.lock";
  std::optional<FileLock> lock = FileLock::acquire(lock_path).value();
  ProcessSpec spec;
  spec.argv = {"sleep", "1"};
  spec.inherit_fds = {lock->fd()};
  Child child = spawn(spec).value();
  lock.reset();  // the parent lets go (as a killed kiln would); the child still holds it
  EXPECT_FALSE(FileLock::try_acquire(lock_path));
  child.wait().value();
  EXPECT_TRUE(FileLock::try_acquire(lock_path));
  // Without inherit_fds the child holds nothing (descriptors are close-on-exec).
  lock.emplace(FileLock::acquire(lock_path).value());
  ProcessSpec plain;
  plain.argv = {"sleep", "1"};
  Child other = spawn(plain).value();
  lock.reset();
  EXPECT_TRUE(FileLock::try_acquire(lock_path));
  other.wait().value();
}

}  // namespace kiln
