// CompileProgress with a fake clock and writer: on a terminal one status line redrawn at most 4
// times a second, cleared for every log message and drawn again after, with an estimate of the
// time left once a job has ended; elsewhere one line per job that ends.
#include "compile/progress.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::compile {

namespace {

struct Fake {
  double now = 100;
  std::vector<std::string> writes;
  std::unique_ptr<CompileProgress> make(bool terminal, int columns = 200, bool verbose = false) {
    return std::make_unique<CompileProgress>(
        CompileProgress::Display{terminal, columns, verbose}, [this] { return now; },
        [this](std::string_view text) { writes.emplace_back(text); });
  }
  // The status lines drawn (each write that clears the line and draws one), without the clear.
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& w : writes)
      if (w.size() > 4 && w.rfind("\r\x1b[K", 0) == 0) out.push_back(w.substr(4));
    return out;
  }
};

std::vector<Job> jobs(std::vector<std::string> labels, std::vector<int> classes = {}) {
  std::vector<Job> out;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    Job j;
    j.label = labels[i];
    j.job_class = i < classes.size() ? classes[i] : 0;
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

TEST(CompileProgress, TerminalRedrawsOneLineAtMostFourTimesASecond) {
  Fake f;
  auto p = f.make(true);
  auto all = jobs({"nvcc a.cu sm_90", "nvcc b.cu sm_90", "link a.so"});
  p->begin(all, 2);
  p->started(0);
  f.now += 0.01;
  p->started(1);
  for (int i = 0; i < 1000; ++i) {  // ten seconds of ticks, every 10 ms
    f.now += 0.01;
    p->tick();
  }
  EXPECT_GE(f.writes.size(), 10u);  // the time so far changes every second
  EXPECT_LE(f.writes.size(), 41u);
  for (const auto& w : f.writes) {
    EXPECT_EQ(w.rfind("\r\x1b[K", 0), 0u) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
  // No job has ended: no estimate; the one running longest named.
  EXPECT_EQ(f.lines().back(), "[0/3] 10 s; 2 running, longest 10 s: nvcc a.cu sm_90");
}

TEST(CompileProgress, EstimateAppearsOnceAJobEndedAndGoesByClass) {
  Fake f;
  auto p = f.make(true);
  // Two device parts (class 3), a front end (class 4), a link of the device parts (class 5), in
  // 2 slots.
  auto all = jobs({"device a", "device b", "front a", "link"}, {3, 3, 4, 5});
  all[3].deps = {0, 1};
  p->begin(all, 2);
  p->started(2);
  f.now += 1;
  p->started(0);
  f.now += 3;
  p->tick();
  EXPECT_LT(p->estimate_left(f.now), 0);  // no job has ended: no basis
  EXPECT_EQ(f.lines().back(), "[0/4] 4 s; 2 running, longest 4 s: front a");
  p->finished(2, 4);
  p->started(1);
  f.now += 0.25;
  p->tick();
  // Every job left is taken to be as long as the front end, the only basis: device a has 0.75 s
  // left, device b 3.75 s, then the link 4 s: 7.75 s (more than the work over the slots, 4.25).
  EXPECT_DOUBLE_EQ(p->estimate_left(f.now), 7.75);
  EXPECT_EQ(f.lines().back(), "[1/4] 4 s, ~8 s left; 2 running, longest 3 s: device a");
  f.now += 56.75;
  p->finished(0, 60);
  // Device b goes by device a's 60 s and has run 57: 3 s left; the link by all that ended,
  // (4 + 60) / 2: 32 s after it.
  EXPECT_DOUBLE_EQ(p->estimate_left(f.now), 35);
  f.now += 10;  // device b runs longer than device a did: the link is left
  EXPECT_DOUBLE_EQ(p->estimate_left(f.now), 32);
  // Work that can run side by side goes over the slots.
  p->begin(jobs({"a", "b", "c", "d", "e"}), 2);
  p->started(0);
  f.now += 10;
  p->finished(0, 10);
  EXPECT_DOUBLE_EQ(p->estimate_left(f.now), 20);
  // A running job of a class none of whose jobs has ended goes by all that ended until it has
  // run longer than they took: then there is no basis.
  p->begin(jobs({"nvcc", "g++"}, {3, 2}), 2);
  p->started(0);
  f.now += 5;
  p->started(1);
  f.now += 5;
  p->finished(0, 10);
  EXPECT_DOUBLE_EQ(p->estimate_left(f.now), 5);
  f.now += 6;
  EXPECT_LT(p->estimate_left(f.now), 0);
  f.now += 1;
  p->tick();
  EXPECT_EQ(f.lines().back(), "[1/2] 17 s; 1 running, longest 12 s: g++");
}

TEST(CompileProgress, ALogMessageClearsTheLineAndDrawsItAgain) {
  Fake f;
  auto p = f.make(true);
  p->begin(jobs({"nvcc a.cu sm_90"}), 1);
  p->started(0);
  ASSERT_EQ(f.lines().size(), 1u);
  const std::string shown = f.lines()[0];
  f.writes.clear();
  testing::internal::CaptureStderr();
  log::warn("disk nearly full");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err, "kiln: warning: disk nearly full\n");
  ASSERT_EQ(f.writes.size(), 2u);
  EXPECT_EQ(f.writes[0], "\r\x1b[K");
  EXPECT_EQ(f.writes[1], "\r\x1b[K" + shown);

  // The end clears the line for good, says nothing more when the jobs did not all end, and
  // leaves log messages alone.
  f.writes.clear();
  p->end();
  EXPECT_EQ(f.writes, std::vector<std::string>{"\r\x1b[K"});
  f.writes.clear();
  testing::internal::CaptureStderr();
  log::warn("after");
  testing::internal::GetCapturedStderr();
  EXPECT_TRUE(f.writes.empty());
}

TEST(CompileProgress, TerminalLineFitsTheWidthAndEndsWithASummary) {
  Fake f;
  auto p = f.make(true, 40);
  p->begin(jobs({"nvcc causal_conv1d_bwd_kernel_with_a_long_name.cu sm_90"}), 1);
  p->started(0);
  const std::string line = f.lines().back();
  EXPECT_EQ(line, "[0/1] 0 s; 1 running, longest 0 s: nvc…");
  f.writes.clear();
  f.now += 125;
  p->finished(0, 125);  // not a line of its own on a terminal
  p->end();
  EXPECT_EQ(f.writes.back(), "kiln: [1/1] jobs done in 2 min 05 s\n");
  for (const auto& w : f.writes) EXPECT_EQ(w.find("nvcc causal"), std::string::npos) << w;
}

TEST(CompileProgress, ElsewhereOneLinePerJobThatEnds) {
  Fake f;
  auto p = f.make(false);
  p->begin(jobs({"nvcc a.cu sm_90", "host a.cu", "link\x1b[2Ja.so"}), 2);
  p->started(0);
  p->gated_done(1);
  for (int i = 0; i < 100; ++i) {
    f.now += 0.1;
    p->tick();
  }
  p->finished(0, 9.6);
  p->started(2);
  for (int i = 0; i < 500; ++i) {  // 50 s silent: a summary every 20 s
    f.now += 0.1;
    p->tick();
  }
  p->finished(2, 50.2);
  p->end();
  EXPECT_EQ(f.writes,
            (std::vector<std::string>{
                "kiln: [1/3] host a.cu (restored)\n", "kiln: [2/3] nvcc a.cu sm_90 (10 s)\n",
                "kiln: [2/3] 30 s, ~0 s left; 1 running, longest 20 s: link\\x1b[2Ja.so\n",
                "kiln: [2/3] 50 s, ~0 s left; 1 running, longest 40 s: link\\x1b[2Ja.so\n",
                "kiln: [3/3] link\\x1b[2Ja.so (50 s)\n"}));
  // -v: a line as each job starts too.
  f.writes.clear();
  auto verbose = f.make(false, 80, true);
  verbose->begin(jobs({"a"}), 1);
  verbose->started(0);
  verbose->finished(0, 1);
  EXPECT_EQ(f.writes, (std::vector<std::string>{"kiln: start a\n", "kiln: [1/1] a (1 s)\n"}));
}

TEST(CompileProgress, RunJobsReportsThroughIt) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-progress-").value();
  std::vector<Job> all = jobs({"one", "two"});
  for (auto& j : all) {
    j.argv = {"true"};
    j.cwd = dir.path();
    j.log = dir.path() / "logs" / (j.label + ".log");
    j.memory_gib = 0.1;
  }
  all[1].deps = {0};
  Fake f;
  auto p = f.make(false);
  RunnerOptions options{1, 64};
  options.progress = p.get();
  ASSERT_TRUE(run_jobs(all, options));
  EXPECT_EQ(f.writes,
            (std::vector<std::string>{"kiln: [1/2] one (0 s)\n", "kiln: [2/2] two (0 s)\n"}));
}

// A plan of several packages: the line counts them (done, building, failed) before the jobs; a
// failed job ends like any other, and the line after the run says nothing of "jobs done".
TEST(CompileProgress, APlansLineCountsItsPackages) {
  Fake f;
  auto p = f.make(true);
  auto all = jobs({"nvcc a.cu sm_90", "wheel a", "nvcc b.cu sm_90", "wheel b", "nvcc c.cu"});
  all[1].deps = {0};
  all[3].deps = {2};
  for (int j : {0, 1}) all[j].group = 0;
  for (int j : {2, 3}) all[j].group = 1;
  all[4].group = 2;
  all[1].step = all[3].step = [] { return Expected<void>(); };
  p->begin(all, 2, {"a", "b", "c"});
  p->started(0);
  p->started(2);
  f.now += 1;
  p->tick();
  EXPECT_EQ(f.lines().back().rfind("packages 0/3 done, 2 building; [0/5] 1 s", 0), 0u)
      << f.lines().back();
  p->finished(0, 1);
  p->finished(1, 0.1);  // a's wheel: a step, never started
  p->failed(2);
  p->failed(3);  // skipped: b's wheel waited for it
  p->started(4);
  f.now += 1;
  p->tick();
  EXPECT_EQ(f.lines().back().rfind("packages 1/3 done, 1 building, 1 failed; [4/5] 2 s", 0), 0u)
      << f.lines().back();
  p->finished(4, 1);
  p->end();
  for (const auto& w : f.writes) EXPECT_EQ(w.find("jobs done"), std::string::npos) << w;
}

}  // namespace kiln::compile
