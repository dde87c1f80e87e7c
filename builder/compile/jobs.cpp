#include "compile/jobs.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <fstream>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <thread>

#include "compile/progress.h"
#include "core/error.h"
#include "core/fault.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::compile {

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Running {
  std::size_t index;
  std::optional<Child> child;  // the running step's process
  double started;
  int lane = 0;
  std::size_t step = 0;    // 0: argv, i: then[i - 1]
  double cpu_seconds = 0;  // of the steps that ended
  long max_rss_kib = 0;
};

const std::vector<std::string>& step_argv(const Job& job, std::size_t step) {
  return step == 0 ? job.argv : job.then[step - 1];
}

Expected<Child> spawn_step(const Job& job, std::size_t step) {
  ProcessSpec spec;
  spec.argv = step_argv(job, step);
  if (job.sandbox) {
    log::verbose(cat("$ ", format_argv(spec.argv), "  (sandboxed)"));
    SandboxSpec sandbox = *job.sandbox;
    for (const auto& [name, value] : job.env) sandbox.keep_env.push_back(name);
    spec.argv = sandboxed(sandbox, spec.argv);
  }
  spec.env_set = job.env;
  spec.env_unset = job.env_unset;
  spec.cwd = job.cwd;
  spec.output = ProcessSpec::Output::Log;
  spec.log_file = job.log;
  spec.append_log = step > 0;
  spec.inherit_fds = job.inherit_fds;
  if (!job.sandbox) log::verbose(cat("$ ", format_argv(spec.argv)));
  return spawn(spec);
}

bool group_alive(pid_t pgid) {
  return pgid > 0 && ::kill(-pgid, 0) == 0;
}

// Stops every running job and everything it started: SIGTERM to each process group, then
// SIGKILL to whatever is left after half a second; returns once the groups are empty.
void stop_all(std::list<Running>& running) {
  std::vector<pid_t> groups;
  for (auto& r : running) {
    groups.push_back(r.child->process_group());
    r.child->kill_group(SIGTERM);
  }
  auto wait_empty = [&](double seconds) {
    double deadline = now() + seconds;
    while (now() < deadline) {
      ProcessResult result;
      for (auto& r : running) r.child->poll(result);  // reap leaders as they exit
      bool any = false;
      for (pid_t g : groups) any = any || group_alive(g);
      if (!any) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  wait_empty(0.5);
  for (pid_t g : groups)
    if (group_alive(g)) ::kill(-g, SIGKILL);
  wait_empty(0.4);
  running.clear();  // ~Child reaps any leader still unreaped
}

}  // namespace

Expected<std::int64_t> job_timeout_seconds() {
  std::string text = env_value("KILN_JOB_TIMEOUT");
  if (text.empty()) return 4 * 3600;
  auto seconds = parse_duration(text);
  if (!seconds || *seconds < 1 || *seconds > 7 * 86400)
    return Error::bad_input(cat("KILN_JOB_TIMEOUT=", printable_excerpt(text, 40),
                                ": expected a duration of 1s to 7d (e.g. 90s, 30m, 2h)"));
  return *seconds;
}

int default_slots() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

namespace {

double available_memory_gib() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  long kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return static_cast<double>(kib) / (1024.0 * 1024.0);
  return 8;
}

}  // namespace

namespace {

enum State { kWaiting, kRunning, kDone, kFailed };

// One run of run_jobs: the jobs' states, the running processes, the slots, lanes and memory they
// hold.
class Runner {
 public:
  Runner(const std::vector<Job>& jobs, const RunnerOptions& options)
      : jobs_(jobs),
        slots_(options.slots > 0 ? options.slots : default_slots()),
        timeout_(options.job_timeout_seconds),
        memory_(options.memory_gib > 0 ? options.memory_gib : available_memory_gib() * 0.9),
        failures_(options.failures),
        groups_(options.groups),
        state_(jobs.size(), kWaiting),
        ask_again_(jobs.size(), 0),
        lane_busy_(static_cast<std::size_t>(slots_) + 1, false),
        own_progress_(options.progress ? nullptr : CompileProgress::to_stderr()),
        progress_(options.progress ? options.progress : own_progress_.get()) {}
  ~Runner() { progress_->end(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Expected<JobStats> run() {
    start_ = now();
    if (timeout_ <= 0) {
      KILN_TRY(std::int64_t seconds, job_timeout_seconds());
      timeout_ = static_cast<double>(seconds);
    }
    progress_->begin(jobs_, slots_, groups_);
    while (done_ < jobs_.size()) {
      if (interrupted()) {
        abort();
        return Error::interrupted("interrupted: stopped every build job");
      }
      KILN_CHECK(start_ready());
      KILN_TRY(bool progressed, reap());
      if (!progressed && done_ < jobs_.size())
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      progress_->tick();
    }
    stats_.wall_seconds = now() - start_;
    return stats_;
  }

 private:
  bool ready(std::size_t i) const {
    for (std::size_t d : jobs_[i].deps)
      if (state_[d] != kDone) return false;
    return true;
  }

  // Starts what fits, in the given order (callers put the critical path first). A step runs now.
  Expected<void> start_ready() {
    for (std::size_t i = 0; i < jobs_.size(); ++i)
      if (jobs_[i].step && state_[i] == kWaiting && ready(i)) KILN_CHECK(run_step(i));
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (jobs_[i].step || state_[i] != kWaiting || !ready(i)) continue;
      int weight = std::min(jobs_[i].weight, slots_);
      bool fits = used_slots_ + weight <= slots_ &&
                  (running_.empty() || used_memory_ + jobs_[i].memory_gib <= memory_);
      if (!fits) break;  // keep the order: a big job is not overtaken forever by small ones
      const double asked = now();
      KILN_TRY(Gate gate, ask_gate(i));
      if (gate == Gate::Done) record(i, asked, 0, JobStats::Verdict::Restored, 1, 0, 0);
      if (gate == Gate::Run) KILN_CHECK(start(i, weight));
    }
    return {};
  }

  // kiln's own step, in this thread: done, or failed (its dependents skipped).
  Expected<void> run_step(std::size_t i) {
    const double began = now();
    state_[i] = kRunning;
    Expected<void> ok;
    try {  // a step raising (an interrupt in its checks) fails it; the loop then stops for that
      ok = jobs_[i].step();
    } catch (const KilnError& e) {
      ok = e.error();
    }
    if (!ok) return fail(i, std::move(ok).error());
    state_[i] = kDone;
    ++done_;
    record(i, began, 0, JobStats::Verdict::Step, 1, 0, 0);
    progress_->finished(i, now() - began);
    return {};
  }

  void record(std::size_t i, double began, int lane, JobStats::Verdict verdict, int slots, long rss,
              double cpu) {
    stats_.timings.push_back(
        {jobs_[i].label, now() - began, rss, cpu, began - start_, lane, slots, verdict, i});
  }

  // A job's gate: Run (or no gate), Wait (asked again half a second later) or Done.
  Expected<Gate> ask_gate(std::size_t i) {
    if (!jobs_[i].gate) return Gate::Run;
    if (now() < ask_again_[i]) return Gate::Wait;
    auto gate = jobs_[i].gate();
    if (!gate) {
      KILN_CHECK(fail(i, std::move(gate).error()));
      return Gate::Wait;  // failed: not started
    }
    if (*gate == Gate::Wait) ask_again_[i] = now() + 0.5;
    if (*gate == Gate::Done) {
      state_[i] = kDone;
      ++done_;
      stats_.gated_done++;
      progress_->gated_done(i);
    }
    return *gate;
  }

  Expected<void> start(std::size_t i, int weight) {
    const Job& job = jobs_[i];
    auto failed = [&](Error e) -> Expected<void> {
      if (job.finally) job.finally();
      return fail(i, std::move(e));
    };
    if (auto dir = ensure_directory(job.log.parent_path()); !dir)
      return failed(std::move(dir).error());
    std::string commands = format_argv(job.argv) + "\n";
    for (const auto& argv : job.then) commands += format_argv(argv) + "\n";
    if (auto cmd = write_file_atomic(job.log.string() + ".cmd", commands); !cmd)
      return failed(std::move(cmd).error());
    if (job.before)
      if (auto ok = job.before(); !ok) return failed(std::move(ok).error());
    auto child = spawn_step(job, 0);
    if (!child) return failed(std::move(child).error());
    state_[i] = kRunning;
    used_slots_ += weight;
    used_memory_ += job.memory_gib;
    const int lane = take_lane();
    running_.emplace_back(Running{i, std::move(*child), now(), lane});
    progress_->started(i);
    fault_point("compile");
    return {};
  }

  int take_lane() {
    for (std::size_t l = 1; l < lane_busy_.size(); ++l)
      if (!lane_busy_[l]) {
        lane_busy_[l] = true;
        return static_cast<int>(l);
      }
    return 0;  // not reached: no more jobs run than there are slots
  }

  // Reaps finished steps: the next step of a job, or its end. True when something ended.
  Expected<bool> reap() {
    bool progressed = false;
    for (auto r = running_.begin(); r != running_.end();) {
      ProcessResult result;
      if (!r->child->poll(result)) {
        if (now() - r->started > timeout_) {
          Error late = overdue(jobs_[r->index]);
          Running ended = std::move(*r);
          r = running_.erase(r);
          KILN_CHECK(end_failed(ended, std::move(late)));
          if (stopped_) return true;
          progressed = true;
          continue;
        }
        ++r;
        continue;
      }
      progressed = true;
      const Job& job = jobs_[r->index];
      r->cpu_seconds += result.cpu_seconds;
      r->max_rss_kib = std::max(r->max_rss_kib, result.max_rss_kib);
      if (result.ok() && r->step < job.then.size()) {
        auto next = spawn_step(job, r->step + 1);
        if (!next) {
          Running ended = std::move(*r);
          r = running_.erase(r);
          KILN_CHECK(end_failed(ended, std::move(next).error()));
          if (stopped_) return true;
          continue;
        }
        r->child.reset();
        r->child.emplace(std::move(*next));
        r->step++;
        ++r;
        continue;
      }
      Running ended = std::move(*r);
      r = running_.erase(r);
      KILN_CHECK(finish(ended, result));
      if (stopped_) return true;
    }
    return progressed;
  }

  void release(const Running& ended) {
    const Job& job = jobs_[ended.index];
    used_slots_ -= std::min(job.weight, slots_);
    used_memory_ -= job.memory_gib;
    if (ended.lane > 0) lane_busy_[static_cast<std::size_t>(ended.lane)] = false;
  }

  // A running job that must end (past its deadline, or its next step not started): its processes
  // stopped, then failed.
  Expected<void> end_failed(Running& ended, Error e) {
    release(ended);
    const std::size_t i = ended.index;
    std::list<Running> one;
    one.push_back(std::move(ended));
    stop_all(one);
    if (jobs_[i].finally) jobs_[i].finally();
    return fail(i, std::move(e));
  }

  // A job's end: its failure fails it; its success runs on_success. Either way its `finally` runs
  // (a lease ends once the object is stored).
  Expected<void> finish(Running& ended, const ProcessResult& result) {
    const Job& job = jobs_[ended.index];
    release(ended);
    const double seconds = now() - ended.started;
    Expected<void> ok = result.ok() ? Expected<void>() : failure(job, ended.step, result);
    if (ok && job.on_success) ok = job.on_success();
    if (job.finally) job.finally();
    stats_.cpu_seconds += ended.cpu_seconds;
    if (!ok) return fail(ended.index, std::move(ok).error());
    state_[ended.index] = kDone;
    ++done_;
    stats_.run++;
    stats_.timings.push_back({job.label, seconds, ended.max_rss_kib, ended.cpu_seconds,
                              ended.started - start_, ended.lane, std::min(job.weight, slots_),
                              JobStats::Verdict::Compiled, ended.index});
    progress_->finished(ended.index, seconds);
    return {};
  }

  // Job `i` failed with `e`, as RunnerOptions::failures says.
  Expected<void> fail(std::size_t i, Error e) {
    using Failures = RunnerOptions::Failures;
    if (failures_ == Failures::Stop) {
      abort();
      return e;
    }
    if (state_[i] != kFailed) {
      state_[i] = kFailed;
      ++done_;
      progress_->failed(i);
    }
    stats_.failures.push_back({i, std::move(e)});
    if (failures_ == Failures::Report) {  // nothing else runs
      for (const auto& r : running_) skip(r.index);
      abort();
      stopped_ = true;
      for (std::size_t j = 0; j < jobs_.size(); ++j)
        if (state_[j] == kWaiting) skip(j);
      return {};
    }
    for (bool more = true; more;) {  // the jobs waiting for it, however far down
      more = false;
      for (std::size_t j = 0; j < jobs_.size(); ++j) {
        if (state_[j] != kWaiting) continue;
        for (std::size_t d : jobs_[j].deps)
          if (state_[d] == kFailed) {
            skip(j);
            more = true;
            break;
          }
      }
    }
    return {};
  }

  void skip(std::size_t j) {
    state_[j] = kFailed;
    ++done_;
    stats_.skipped.push_back(j);
    progress_->failed(j);
  }

  static Error failure(const Job& job, std::size_t step, const ProcessResult& result) {
    auto text = read_file(job.log);
    std::string limits;
    if (job.sandbox) {
      const SandboxLimits& l = job.sandbox->limits;
      limits = cat("\n(in the sandbox, as nobody: at most ", l.processes,
                   " processes (KILN_MAX_PROCESSES), ", l.files, " open files, ", l.file_size >> 20,
                   " MiB a file (KILN_MAX_FILE_SIZE))");
    }
    return Error::failed(cat(job.label, " failed (",
                             result.term_signal ? cat("signal ", result.term_signal)
                                                : cat("exit ", result.exit_code),
                             "); log: ", job.log.string()),
                         cat("command: ", format_argv(step_argv(job, step)), "\n",
                             tail_lines(text ? *text : std::string(), 25), limits));
  }

  Error overdue(const Job& job) const {
    auto text = read_file(job.log);
    return Error::failed(cat(job.label, " ran past its deadline of ", format_seconds(timeout_),
                             " (KILN_JOB_TIMEOUT) and was stopped; log: ", job.log.string()),
                         tail_lines(text ? *text : std::string(), 25));
  }

  // Stops every running job and runs their `finally`.
  void abort() {
    for (const auto& r : running_)
      if (jobs_[r.index].finally) jobs_[r.index].finally();
    stop_all(running_);
  }

  const std::vector<Job>& jobs_;
  const int slots_;
  double timeout_;
  const double memory_;
  const RunnerOptions::Failures failures_;
  const std::vector<std::string> groups_;
  JobStats stats_;
  std::vector<State> state_;
  std::vector<double> ask_again_;  // a waiting gate's next question
  std::vector<bool> lane_busy_;    // per lane (1..slots): a job runs in it
  std::list<Running> running_;
  std::size_t done_ = 0;
  int used_slots_ = 0;
  double used_memory_ = 0;
  double start_ = 0;
  bool stopped_ = false;  // Failures::Report stopped every job: nothing runs any more
  std::unique_ptr<CompileProgress> own_progress_;
  CompileProgress* progress_;
};

}  // namespace

Expected<JobStats> run_jobs(const std::vector<Job>& jobs, const RunnerOptions& options) {
  return Runner(jobs, options).run();
}

std::vector<Job> pool_order(std::vector<Job> jobs) {
  // The longest chain each job begins: its estimate and the longest chain of a job waiting for it.
  const std::size_t n = jobs.size();
  std::vector<std::vector<std::size_t>> waiting(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t d : jobs[i].deps)
      if (d < n) waiting[d].push_back(i);
  std::vector<double> chain(n, -1);
  std::function<double(std::size_t)> chain_of = [&](std::size_t i) -> double {
    if (chain[i] >= 0) return chain[i];
    chain[i] = jobs[i].estimate;  // what a cycle of deps would find
    double after = 0;
    for (std::size_t w : waiting[i]) after = std::max(after, chain_of(w));
    return chain[i] = jobs[i].estimate + after;
  };
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  for (std::size_t i = 0; i < n; ++i) chain_of(i);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (jobs[a].rank != jobs[b].rank) return jobs[a].rank < jobs[b].rank;
    return chain[a] > chain[b];
  });
  std::vector<std::size_t> position(n);
  for (std::size_t p = 0; p < n; ++p) position[order[p]] = p;
  std::vector<Job> out;
  out.reserve(n);
  for (std::size_t p : order) {
    Job job = std::move(jobs[p]);
    for (auto& d : job.deps) d = position[d];
    out.push_back(std::move(job));
  }
  return out;
}

}  // namespace kiln::compile
