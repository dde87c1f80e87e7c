// A parallel job runner: subprocess jobs with dependencies and weights, run in as many slots as
// the machine allows, each with its own log; the first failure stops everything and reports the
// failing command and the tail of its log; an interrupt stops every child within a second.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/expected.h"
#include "core/sandbox.h"

namespace kiln::compile {

// What a job's gate says when the job could start: run it; wait (another worker is making its
// output: ask again in a moment, other jobs start meanwhile); or done (its output was put in
// place without running it: restored from the object cache).
enum class Gate { Run, Wait, Done };

struct Job {
  std::string label;  // "nvcc causal_conv1d_bwd.cu sm_90"
  std::vector<std::string> argv;
  // Further commands, run one after another in the same slot once the previous one succeeded;
  // the job fails at the first that fails. All write to the job's log.
  std::vector<std::vector<std::string>> then;
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<std::string> env_unset;
  std::filesystem::path cwd;
  std::filesystem::path log;
  int weight = 1;                 // slots it occupies (e.g. nvcc --threads)
  double memory_gib = 1;          // estimated peak memory
  std::vector<std::size_t> deps;  // indices of jobs that must finish first
  std::vector<int> inherit_fds;   // descriptors the process keeps (ProcessSpec::inherit_fds)
  // Jobs of one class take alike times (the planner's JobClass): the progress line's estimate of
  // the time left goes by how long the class's jobs that ended took.
  int job_class = 0;
  // The files it makes that other jobs, the link or the object cache read. run_jobs does not look
  // at them; a fake runner in tests writes them instead of running the commands.
  std::vector<std::filesystem::path> outputs;
  // Runs right before the first command (e.g. to put inputs from other jobs in place).
  std::function<Expected<void>()> before;
  // Runs after the last command succeeded (e.g. to store the object in the cache).
  std::function<Expected<void>()> on_success;
  // Asked when the job is ready and fits, before `before` (empty: run): a restore from the object
  // cache (Done; a job that is a restore alone has no argv), a remote cache's lease (compile once
  // across workers).
  std::function<Expected<Gate>()> gate;
  // Runs once a job that ran has ended, however it ended (e.g. to release the lease).
  std::function<void()> finally;
  // The sandbox its commands run in (core/sandbox.h), the job's own variables passed in too;
  // none: they run as kiln's children.
  std::shared_ptr<const SandboxSpec> sandbox;
};

struct JobStats {
  std::size_t run = 0;
  std::size_t gated_done = 0;  // jobs whose gate said Done: their output was restored
  double wall_seconds = 0;
  double cpu_seconds = 0;  // user + system seconds of every job
  struct Timing {
    std::string label;
    double seconds;
    long max_rss_kib;
    double cpu_seconds;  // user + system, the job's processes together
  };
  std::vector<Timing> timings;
};

class CompileProgress;

struct RunnerOptions {
  int slots = 0;                        // 0: the number of cores
  double memory_gib = 0;                // 0: MemAvailable
  CompileProgress* progress = nullptr;  // what it shows; none: CompileProgress::to_stderr()
  double job_timeout_seconds = 0;       // 0: job_timeout_seconds()
};

// How long one job may run before it is stopped and the build fails naming it: $KILN_JOB_TIMEOUT
// (parse_duration's form, 1 s to 7 d), else 4 hours (a hung compiler is a real failure mode).
Expected<std::int64_t> job_timeout_seconds();

Expected<JobStats> run_jobs(const std::vector<Job>& jobs, const RunnerOptions& options);

int default_slots();

}  // namespace kiln::compile
