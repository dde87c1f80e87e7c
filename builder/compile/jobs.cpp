#include "compile/jobs.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <list>
#include <optional>
#include <thread>

#include "core/fault.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"

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
  spec.env_set = job.env;
  spec.env_unset = job.env_unset;
  spec.cwd = job.cwd;
  spec.output = ProcessSpec::Output::Log;
  spec.log_file = job.log;
  spec.append_log = step > 0;
  spec.inherit_fds = job.inherit_fds;
  log::verbose(cat("$ ", format_argv(spec.argv)));
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

Expected<JobStats> run_jobs(const std::vector<Job>& jobs, const RunnerOptions& options) {
  const int slots = options.slots > 0 ? options.slots : default_slots();
  const double memory = options.memory_gib > 0 ? options.memory_gib : available_memory_gib() * 0.9;
  JobStats stats;
  double start = now();
  std::vector<int> state(jobs.size(), 0);  // 0 waiting, 1 running, 2 done
  std::list<Running> running;
  std::size_t done = 0;
  int used_slots = 0;
  double used_memory = 0;
  const std::size_t total = jobs.size();

  while (done < total) {
    if (interrupted()) {
      stop_all(running);
      return Error::interrupted("interrupted: stopped every build job");
    }
    // Start what fits, in the given order (callers put the critical path first).
    for (std::size_t i = 0; i < total; ++i) {
      if (state[i] != 0) continue;
      bool ready = true;
      for (std::size_t d : jobs[i].deps) ready = ready && state[d] == 2;
      if (!ready) continue;
      int weight = std::min(jobs[i].weight, slots);
      bool fits = used_slots + weight <= slots &&
                  (running.empty() || used_memory + jobs[i].memory_gib <= memory);
      if (!fits) break;  // keep the order: a big job is not overtaken forever by small ones
      KILN_CHECK(ensure_directory(jobs[i].log.parent_path()));
      std::string commands = format_argv(jobs[i].argv) + "\n";
      for (const auto& argv : jobs[i].then) commands += format_argv(argv) + "\n";
      KILN_CHECK(write_file_atomic(jobs[i].log.string() + ".cmd", commands));
      if (jobs[i].before) {
        auto ok = jobs[i].before();
        if (!ok) {
          stop_all(running);
          return std::move(ok).error();
        }
      }
      auto child = spawn_step(jobs[i], 0);
      if (!child) {
        stop_all(running);
        return child.error();
      }
      state[i] = 1;
      used_slots += weight;
      used_memory += jobs[i].memory_gib;
      running.emplace_back(Running{i, std::move(*child), now()});
      log::info(cat("start ", jobs[i].label));
      fault_point("compile");
    }
    // Reap finished jobs.
    bool progressed = false;
    for (auto r = running.begin(); r != running.end();) {
      ProcessResult result;
      if (!r->child->poll(result)) {
        ++r;
        continue;
      }
      progressed = true;
      std::size_t i = r->index;
      const Job& job = jobs[i];
      r->cpu_seconds += result.cpu_seconds;
      r->max_rss_kib = std::max(r->max_rss_kib, result.max_rss_kib);
      if (result.ok() && r->step < job.then.size()) {
        auto next = spawn_step(job, r->step + 1);
        if (!next) {
          stop_all(running);
          return next.error();
        }
        r->child.reset();
        r->child.emplace(std::move(*next));
        r->step++;
        ++r;
        continue;
      }
      double seconds = now() - r->started;
      double cpu = r->cpu_seconds;
      long rss = r->max_rss_kib;
      const std::vector<std::string>& argv = step_argv(job, r->step);
      used_slots -= std::min(job.weight, slots);
      used_memory -= job.memory_gib;
      r = running.erase(r);
      if (!result.ok()) {
        stop_all(running);
        auto text = read_file(job.log);
        return Error::failed(cat(job.label, " failed (",
                                 result.term_signal ? cat("signal ", result.term_signal)
                                                    : cat("exit ", result.exit_code),
                                 "); log: ", job.log.string()),
                             cat("command: ", format_argv(argv), "\n",
                                 tail_lines(text ? *text : std::string(), 25)));
      }
      if (job.on_success) {
        auto ok = job.on_success();
        if (!ok) {
          stop_all(running);
          return std::move(ok).error();
        }
      }
      state[i] = 2;
      ++done;
      stats.run++;
      stats.cpu_seconds += cpu;
      stats.timings.push_back({job.label, seconds, rss, cpu});
      log::info(cat("[", done, "/", total, "] ", job.label, " (", static_cast<int>(seconds + 0.5),
                    " s)"));
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stats.wall_seconds = now() - start;
  return stats;
}

}  // namespace kiln::compile
