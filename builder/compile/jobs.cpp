#include "compile/jobs.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <list>
#include <memory>
#include <optional>
#include <thread>

#include "compile/progress.h"
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

// One run of run_jobs: the jobs' states, the running processes, the slots and memory they hold.
class Runner {
 public:
  Runner(const std::vector<Job>& jobs, const RunnerOptions& options)
      : jobs_(jobs),
        slots_(options.slots > 0 ? options.slots : default_slots()),
        timeout_(options.job_timeout_seconds),
        memory_(options.memory_gib > 0 ? options.memory_gib : available_memory_gib() * 0.9),
        state_(jobs.size(), 0),
        ask_again_(jobs.size(), 0),
        own_progress_(options.progress ? nullptr : CompileProgress::to_stderr()),
        progress_(options.progress ? options.progress : own_progress_.get()) {}
  ~Runner() { progress_->end(); }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Expected<JobStats> run() {
    const double start = now();
    if (timeout_ <= 0) {
      KILN_TRY(std::int64_t seconds, job_timeout_seconds());
      timeout_ = static_cast<double>(seconds);
    }
    progress_->begin(jobs_, slots_);
    while (done_ < jobs_.size()) {
      if (interrupted()) {
        abort();
        return Error::interrupted("interrupted: stopped every build job");
      }
      KILN_CHECK(start_ready());
      KILN_TRY(bool progressed, reap());
      if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      progress_->tick();
    }
    stats_.wall_seconds = now() - start;
    return stats_;
  }

 private:
  // Starts what fits, in the given order (callers put the critical path first).
  Expected<void> start_ready() {
    for (std::size_t i = 0; i < jobs_.size(); ++i) {
      if (state_[i] != 0) continue;
      bool ready = true;
      for (std::size_t d : jobs_[i].deps) ready = ready && state_[d] == 2;
      if (!ready) continue;
      int weight = std::min(jobs_[i].weight, slots_);
      bool fits = used_slots_ + weight <= slots_ &&
                  (running_.empty() || used_memory_ + jobs_[i].memory_gib <= memory_);
      if (!fits) break;  // keep the order: a big job is not overtaken forever by small ones
      KILN_TRY(Gate gate, ask_gate(i));
      if (gate == Gate::Run) KILN_CHECK(start(i, weight));
    }
    return {};
  }

  // A job's gate: Run (or no gate), Wait (asked again half a second later) or Done.
  Expected<Gate> ask_gate(std::size_t i) {
    if (!jobs_[i].gate) return Gate::Run;
    if (now() < ask_again_[i]) return Gate::Wait;
    auto gate = jobs_[i].gate();
    if (!gate) {
      abort();
      return std::move(gate).error();
    }
    if (*gate == Gate::Wait) ask_again_[i] = now() + 0.5;
    if (*gate == Gate::Done) {
      state_[i] = 2;
      ++done_;
      stats_.gated_done++;
      progress_->gated_done(i);
    }
    return *gate;
  }

  Expected<void> start(std::size_t i, int weight) {
    const Job& job = jobs_[i];
    KILN_CHECK(ensure_directory(job.log.parent_path()));
    std::string commands = format_argv(job.argv) + "\n";
    for (const auto& argv : job.then) commands += format_argv(argv) + "\n";
    KILN_CHECK(write_file_atomic(job.log.string() + ".cmd", commands));
    auto failed = [&](Error e) -> Expected<void> {
      if (job.finally) job.finally();
      abort();
      return e;
    };
    if (job.before)
      if (auto ok = job.before(); !ok) return failed(std::move(ok).error());
    auto child = spawn_step(job, 0);
    if (!child) return failed(std::move(child).error());
    state_[i] = 1;
    used_slots_ += weight;
    used_memory_ += job.memory_gib;
    running_.emplace_back(Running{i, std::move(*child), now()});
    progress_->started(i);
    fault_point("compile");
    return {};
  }

  // Reaps finished steps: the next step of a job, or its end. True when something ended.
  Expected<bool> reap() {
    bool progressed = false;
    for (auto r = running_.begin(); r != running_.end();) {
      ProcessResult result;
      if (!r->child->poll(result)) {
        if (now() - r->started > timeout_) {
          Error late = overdue(jobs_[r->index]);
          abort();
          return late;
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
          abort();
          return std::move(next).error();
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
    }
    return progressed;
  }

  // A job's end: its failure stops everything; its success runs on_success. Either way its
  // `finally` runs (a lease ends once the object is stored).
  Expected<void> finish(Running& ended, const ProcessResult& result) {
    const Job& job = jobs_[ended.index];
    used_slots_ -= std::min(job.weight, slots_);
    used_memory_ -= job.memory_gib;
    const double seconds = now() - ended.started;
    Expected<void> ok = result.ok() ? Expected<void>() : failure(job, ended.step, result);
    if (ok && job.on_success) ok = job.on_success();
    if (job.finally) job.finally();
    if (!ok) {
      abort();
      return ok;
    }
    state_[ended.index] = 2;
    ++done_;
    stats_.run++;
    stats_.cpu_seconds += ended.cpu_seconds;
    stats_.timings.push_back({job.label, seconds, ended.max_rss_kib, ended.cpu_seconds});
    progress_->finished(ended.index, seconds);
    return {};
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
  JobStats stats_;
  std::vector<int> state_;         // 0 waiting, 1 running, 2 done
  std::vector<double> ask_again_;  // a waiting gate's next question
  std::list<Running> running_;
  std::size_t done_ = 0;
  int used_slots_ = 0;
  double used_memory_ = 0;
  std::unique_ptr<CompileProgress> own_progress_;
  CompileProgress* progress_;
};

}  // namespace

Expected<JobStats> run_jobs(const std::vector<Job>& jobs, const RunnerOptions& options) {
  return Runner(jobs, options).run();
}

}  // namespace kiln::compile
