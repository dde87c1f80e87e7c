#include "compile/jobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "core/fs.h"
#include "core/strings.h"

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

// A pool of two packages' jobs (group 0 and 1): a failing job of one fails its dependents only,
// the other package's jobs and its step still run; the failure and the skipped jobs are reported.
TEST(Jobs, IsolatedFailuresCostOnlyTheJobsWaitingForThem) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("a-bad", "echo boom >&2; exit 3", dir.path()),
                           sh("a-link", "touch a-link", dir.path()),
                           sh("b-slow", "sleep 0.3; touch b-slow", dir.path()),
                           sh("b-link", "touch b-link", dir.path())};
  jobs[1].deps = {0};
  jobs[3].deps = {2};
  jobs[0].group = jobs[1].group = 0;
  jobs[2].group = jobs[3].group = 1;
  std::vector<std::string> steps;
  for (int g = 0; g < 2; ++g) {
    Job step;
    step.label = cat("wheel ", g);
    step.group = g;
    step.deps = {static_cast<std::size_t>(g * 2 + 1)};
    step.step = [&steps, g]() -> Expected<void> {
      steps.push_back(cat("wheel ", g));
      return {};
    };
    jobs.push_back(std::move(step));
  }
  RunnerOptions options{2, 64};
  options.failures = RunnerOptions::Failures::Isolate;
  options.groups = {"a", "b"};
  auto stats = run_jobs(jobs, options).value();
  ASSERT_EQ(stats.failures.size(), 1u);
  EXPECT_EQ(stats.failures[0].job, 0u);
  EXPECT_NE(stats.failures[0].error.message.find("a-bad failed (exit 3)"), std::string::npos);
  std::vector<std::size_t> skipped = stats.skipped;
  std::sort(skipped.begin(), skipped.end());
  EXPECT_EQ(skipped, (std::vector<std::size_t>{1, 4}));  // a's link and a's step
  EXPECT_FALSE(fs::exists(dir.path() / "a-link"));
  EXPECT_TRUE(fs::exists(dir.path() / "b-link"));
  EXPECT_EQ(steps, std::vector<std::string>{"wheel 1"});
  EXPECT_EQ(stats.run, 2u);  // b-slow and b-link; a step is no process
  // Timings say where each ran: processes in lanes 1..2, the step in kiln's lane 0.
  for (const auto& t : stats.timings) {
    if (t.verdict == JobStats::Verdict::Step) {
      EXPECT_EQ(t.lane, 0);
      EXPECT_EQ(t.label, "wheel 1");
    } else {
      EXPECT_GE(t.lane, 1);
      EXPECT_LE(t.lane, 2);
      EXPECT_GE(t.start, 0);
    }
  }
}

// Report: the first failure stops every job (the slow one is killed, the waiting ones skipped) and
// the run still returns its stats, so the caller can say which package failed.
TEST(Jobs, ReportedFailuresStopEverythingButReturnTheStats) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("slow", "sleep 20; touch slow", dir.path()),
                           sh("bad", "sleep 0.2; exit 1", dir.path()),
                           sh("later", "touch later", dir.path())};
  jobs[2].deps = {0};
  RunnerOptions options{2, 64};
  options.failures = RunnerOptions::Failures::Report;
  const auto t0 = std::chrono::steady_clock::now();
  auto stats = run_jobs(jobs, options).value();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5);
  ASSERT_EQ(stats.failures.size(), 1u);
  EXPECT_EQ(stats.failures[0].job, 1u);
  std::vector<std::size_t> skipped = stats.skipped;
  std::sort(skipped.begin(), skipped.end());
  EXPECT_EQ(skipped, (std::vector<std::size_t>{0, 2}));
  EXPECT_FALSE(fs::exists(dir.path() / "later"));
}

// pool_order: by rank, then the longest chain of estimated work each job begins, across
// packages; deps follow their jobs.
TEST(Jobs, PoolOrderInterleavesPackagesByRankThenLongestChain) {
  auto job = [](std::string label, int rank, double estimate, std::vector<std::size_t> deps = {}) {
    Job j;
    j.label = std::move(label);
    j.rank = rank;
    j.estimate = estimate;
    j.deps = std::move(deps);
    return j;
  };
  std::vector<Job> jobs = {job("a-small", 2, 10),       job("a-link", 6, 0, {0}),
                           job("b-big", 2, 50),         job("b-host", 1, 5, {2}),
                           job("b-link", 6, 1, {2, 3}), job("a-host", 1, 5, {0})};
  // b-host's chain is 5 + b-link's 1, a-host's 5 + a-link's 0: the same rank, b first (though
  // listed after a's); b-big's 50 + 6 before a-small's 10 + 5.
  jobs[1].deps = {0, 5};
  std::vector<Job> ordered = pool_order(std::move(jobs));
  std::vector<std::string> labels;
  for (const auto& j : ordered) labels.push_back(j.label);
  EXPECT_EQ(labels,
            (std::vector<std::string>{"b-host", "a-host", "b-big", "a-small", "b-link", "a-link"}));
  EXPECT_EQ(ordered[5].deps, (std::vector<std::size_t>{3, 1}));  // a-link: a-small, a-host
  EXPECT_EQ(ordered[0].deps, (std::vector<std::size_t>{2}));     // b-host: b-big
}

}  // namespace kiln::compile
