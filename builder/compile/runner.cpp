#include "compile/runner.h"

#include "core/fs.h"

namespace kiln::compile {

Expected<JobStats> ProcessRunner::run(const std::vector<Job>& jobs, const RunnerOptions& options) {
  return run_jobs(jobs, options);
}

Expected<NativeResult> run_graph(JobGraph graph, CommandRunner& runner, int slots, int lock_fd) {
  for (const auto& dir : graph.directories) KILN_CHECK(ensure_directory(dir));
  NativeResult result;
  result.modules = std::move(graph.modules);
  std::vector<Job> jobs = schedule(std::move(graph));
  if (lock_fd >= 0)
    for (auto& job : jobs) job.inherit_fds = {lock_fd};
  RunnerOptions options;
  options.slots = slots;
  KILN_TRY(result.stats, runner.run(jobs, options));
  // Objects and device parts restored from the cache: the restore jobs (and, with leases, the
  // jobs another worker's output made Done).
  result.objects_reused = result.stats.gated_done;
  return result;
}

}  // namespace kiln::compile
