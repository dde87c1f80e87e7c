#include "core/process.h"

#include <gtest/gtest.h>

#include "core/fs.h"

namespace kiln {

TEST(Process, CapturesOutputAndExitCode) {
  ProcessSpec spec;
  spec.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"};
  auto r = run_process(spec).value();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.output.find("out"), std::string::npos);
  EXPECT_NE(r.output.find("err"), std::string::npos);
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

}  // namespace kiln
