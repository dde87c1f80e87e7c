// Where a job graph meets processes (ninja's CommandRunner): run_graph hands the scheduled jobs to
// a CommandRunner. The real one starts them as processes (run_jobs); tests give a fake that records
// the jobs and makes their outputs, so the graph can be run without a compiler.
#pragma once

#include <vector>

#include "compile/job_graph.h"
#include "compile/jobs.h"
#include "compile/native.h"
#include "core/expected.h"

namespace kiln::compile {

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs every job once its deps have succeeded; the first failure stops all and is returned.
  virtual Expected<JobStats> run(const std::vector<Job>& jobs, const RunnerOptions& options) = 0;
};

// Subprocesses, in parallel slots (run_jobs).
class ProcessRunner final : public CommandRunner {
 public:
  Expected<JobStats> run(const std::vector<Job>& jobs, const RunnerOptions& options) override;
};

// Creates the directories the graph's jobs write into, then runs its jobs in schedule()'s order
// in `slots` slots, each keeping `lock_fd` open (the build root's lock; -1: none).
Expected<NativeResult> run_graph(JobGraph graph, CommandRunner& runner, int slots, int lock_fd);

}  // namespace kiln::compile
