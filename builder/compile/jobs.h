// A parallel job runner (ninja's CommandRunner): subprocess jobs with dependencies and weights,
// run in as many slots as the machine allows, each with its own log. The first failure stops
// everything and reports the failing command and the tail of its log; or, kept going, a failure
// fails only the jobs that depend on it. An interrupt stops every child within a second.
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
  // Ready jobs start by rank (lower first: the planner's order of its classes), then by the longest
  // chain of estimated work they begin (pool_order). The estimate is its work in its backend's
  // unit (native: bytes of the package's files its compile parses).
  int rank = 0;
  double estimate = 0;
  // The package it builds (an index into RunnerOptions::groups), and what the trace says of it.
  int group = 0;
  std::string unit, arch;  // "csrc/x.cu[2/9]", "sm_90"; empty where a job has none
  // A step of kiln's own, run in kiln's thread once the deps are done, taking no slot (the
  // package's wheel written and committed as soon as its jobs are done). A job with one has no
  // argv.
  std::function<Expected<void>()> step;
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
  enum class Verdict { Compiled, Restored, Step };
  struct Timing {
    std::string label;
    double seconds;
    long max_rss_kib;
    double cpu_seconds;  // user + system, the job's processes together
    // Where it ran in the run (the trace): seconds from the run's start; its lane (0 for kiln's
    // own thread: restores and steps; 1.. for a slot); the slots it held; what it was. A timing a
    // backend adds (the compiles inside a setuptools build) has lane -1.
    double start = 0;
    int lane = -1;
    int slots = 1;
    Verdict verdict = Verdict::Compiled;
    std::size_t job = 0;  // its index in the run's jobs
  };
  std::vector<Timing> timings;  // compiled, restored and steps, as they ended
  // Failures Report or Isolate (RunnerOptions::failures): each job that failed, and why; the jobs
  // not run because of it (skipped).
  struct Failure {
    std::size_t job;
    Error error;
  };
  std::vector<Failure> failures;
  std::vector<std::size_t> skipped;
};

class CompileProgress;

struct RunnerOptions {
  int slots = 0;                        // 0: the number of cores
  double memory_gib = 0;                // 0: MemAvailable
  CompileProgress* progress = nullptr;  // what it shows; none: CompileProgress::to_stderr()
  double job_timeout_seconds = 0;       // 0: job_timeout_seconds()
  // What a failing job does. Stop: every job is stopped and the failure is the run's error.
  // Report: every job is stopped too, and the run returns its stats with the failure
  // (JobStats::failures) and the jobs not run (skipped). Isolate: it fails only the jobs that wait
  // for it (skipped); the others run on.
  enum class Failures { Stop, Report, Isolate };
  Failures failures = Failures::Stop;
  // The names of the jobs' groups (the packages of a plan): the progress line counts them.
  std::vector<std::string> groups;
};

// How long one job may run before it is stopped and the build fails naming it: $KILN_JOB_TIMEOUT
// (parse_duration's form, 1 s to 7 d), else 4 hours (a hung compiler is a real failure mode).
Expected<std::int64_t> job_timeout_seconds();

Expected<JobStats> run_jobs(const std::vector<Job>& jobs, const RunnerOptions& options);

// `jobs` in the order the runner starts ready ones: by rank, then longest chain of estimated work
// first (a job's estimate and the longest chain of jobs that wait for it); deps renumbered.
// Several packages' jobs ordered together interleave by the same rule.
std::vector<Job> pool_order(std::vector<Job> jobs);

int default_slots();

}  // namespace kiln::compile
