#include "build/jobs.h"

#include <gtest/gtest.h>

#include "core/fs.h"

namespace kiln::build {

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
  jobs[2].on_success = [&]() -> Expected<void> { ++hooks; return {}; };
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

TEST(Jobs, SlotsBoundParallelism) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-jobs-").value();
  std::vector<Job> jobs = {sh("a", "sleep 0.2", dir.path()), sh("b", "sleep 0.2", dir.path())};
  auto stats = run_jobs(jobs, {1, 64}).value();
  EXPECT_GE(stats.wall_seconds, 0.4);
}

}  // namespace kiln::build
