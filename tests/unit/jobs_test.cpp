#include "compile/jobs.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/fs.h"

namespace kiln::compile {

namespace {
Job sh(const std::string& label, const std::string& script, const fs::path& dir) {
  Job j;
  j.label = label;
  j.argv = {"sh", "-c", script};
  j.cwd = dir;
  j.log = dir / "logs" / (label + ".log");
  j.memory_gib = 0.1;
  return j;
}
}  // namespace

TEST(Jobs, RunsInDependencyOrderInParallel) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("a", "sleep 0.3; echo a >> order", dir.path()),
                           sh("b", "sleep 0.3; echo b >> order", dir.path()),
                           sh("link", "echo link >> order", dir.path())};
  jobs[2].deps = {0, 1};
  int hooks = 0;
  jobs[2].on_success = [&]() -> Expected<void> {
    ++hooks;
    return {};
  };
  auto stats = run_jobs(jobs, {2, 64}).value();
  EXPECT_EQ(stats.run, 3u);
  EXPECT_EQ(hooks, 1);
  EXPECT_LT(stats.wall_seconds, 0.55);  // a and b overlapped
  std::string order = read_file(dir.path() / "order").value();
  EXPECT_EQ(order.substr(order.size() - 5), "link\n");
}

TEST(Jobs, FirstFailureStopsEverythingAndShowsTheLog) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("slow", "sleep 20", dir.path()),
                           sh("bad", "echo 'error: x.cu:3: boom' >&2; exit 2", dir.path()),
                           sh("never", "touch never", dir.path())};
  jobs[2].deps = {1};
  auto r = run_jobs(jobs, {2, 64});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bad failed (exit 2)"), std::string::npos);
  EXPECT_NE(r.error().detail.find("error: x.cu:3: boom"), std::string::npos);
  EXPECT_NE(r.error().detail.find("command: sh -c"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "never"));
}

TEST(Jobs, GatesWaitWhileOthersRunAndDoneJobsNeverRun) {
  // "held" waits for three questions (another worker holds its lease) while "free" runs; then
  // it is done without running; "dependent" runs after it; every job that ran is released.
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("held", "touch held", dir.path()),
                           sh("free", "touch free", dir.path()),
                           sh("dependent", "touch dependent", dir.path())};
  jobs[2].deps = {0};
  int asked = 0;
  std::vector<std::string> released;
  jobs[0].gate = [&]() -> Expected<Gate> { return ++asked < 3 ? Gate::Wait : Gate::Done; };
  jobs[0].finally = [&] { released.push_back("held"); };
  jobs[1].gate = []() -> Expected<Gate> { return Gate::Run; };
  jobs[1].finally = [&] { released.push_back("free"); };
  auto stats = run_jobs(jobs, {1, 64}).value();
  EXPECT_EQ(asked, 3);
  EXPECT_EQ(stats.run, 2u);
  EXPECT_EQ(stats.gated_done, 1u);
  EXPECT_FALSE(fs::exists(dir.path() / "held"));
  EXPECT_TRUE(fs::exists(dir.path() / "free") && fs::exists(dir.path() / "dependent"));
  EXPECT_EQ(released, std::vector<std::string>{"free"});

  // A failing job that holds a lease releases it.
  std::vector<Job> failing = {sh("bad", "exit 3", dir.path())};
  bool let_go = false;
  failing[0].gate = []() -> Expected<Gate> { return Gate::Run; };
  failing[0].finally = [&] { let_go = true; };
  EXPECT_FALSE(run_jobs(failing, {1, 64}));
  EXPECT_TRUE(let_go);
}

TEST(Jobs, SlotsBoundParallelism) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("a", "sleep 0.2", dir.path()), sh("b", "sleep 0.2", dir.path())};
  auto stats = run_jobs(jobs, {1, 64}).value();
  EXPECT_GE(stats.wall_seconds, 0.4);
}

TEST(Jobs, StepsRunInOrderInOneSlotAndShareTheLog) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  Job j = sh("multi", "echo one; test -f input && echo two-sees-input", dir.path());
  j.then = {{"sh", "-c", "echo three; echo three >> order"},
            {"sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"}};
  j.before = [&]() -> Expected<void> { return write_file_atomic(dir.path() / "input", "x"); };
  auto stats = run_jobs({j}, {1, 64}).value();
  EXPECT_EQ(stats.run, 1u);
  EXPECT_EQ(read_file(dir.path() / "logs" / "multi.log").value(), "one\ntwo-sees-input\nthree\n");
  std::string commands = read_file(dir.path() / "logs" / "multi.log.cmd").value();
  EXPECT_EQ(std::count(commands.begin(), commands.end(), '\n'), 3);
  ASSERT_EQ(stats.timings.size(), 1u);
  EXPECT_GT(stats.timings[0].cpu_seconds, 0.05);  // the busy loop, counted with the other steps
  EXPECT_DOUBLE_EQ(stats.cpu_seconds, stats.timings[0].cpu_seconds);
}

TEST(Jobs, AFailingLaterStepFailsTheJobAndNamesItsCommand) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  Job j = sh("multi", "echo first", dir.path());
  j.then = {{"sh", "-c", "echo 'second broke' >&2; exit 3"}, {"sh", "-c", "touch never"}};
  auto r = run_jobs({j}, {1, 64});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("multi failed (exit 3)"), std::string::npos);
  EXPECT_NE(r.error().detail.find("command: sh -c 'echo '"), std::string::npos) << r.error().detail;
  EXPECT_NE(r.error().detail.find("second broke"), std::string::npos);
  EXPECT_NE(r.error().detail.find("first"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "never"));
}

TEST(Jobs, AFailingBeforeHookStopsTheBuild) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  Job j = sh("guarded", "touch ran", dir.path());
  j.before = []() -> Expected<void> { return Error::failed("inputs disagree"); };
  auto r = run_jobs({j}, {1, 64});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "inputs disagree");
  EXPECT_FALSE(fs::exists(dir.path() / "ran"));
}

}  // namespace kiln::compile
