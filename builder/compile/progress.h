// What a run of build jobs shows on stderr. On a terminal: one status line, rewritten in place at
// most 4 times a second, with the jobs done of all, the time so far, the time left where the jobs
// that ended give a basis, and the running jobs (how many, and the one running longest); every log
// message clears it first and draws it again after. Elsewhere (a log, a pipe): one line per job
// that ends ("[3/40] nvcc x.cu sm_90 (41 s)"), and the status line after 20 s without one, so a CI
// log is never silent for long ("[3/40] 2 min 10 s; 2 running, longest 65 s: …"). With -v, a line
// as each job starts, and on a terminal one as each ends. The clock and the writer are the
// caller's, so tests run it without a terminal (as fetch/progress.h's DownloadProgress).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compile/jobs.h"
#include "core/terminal.h"

namespace kiln::compile {

class CompileProgress {
 public:
  struct Display {
    bool terminal = false;
    int columns = 80;      // the terminal's width
    bool verbose = false;  // -v: a line as each job starts (and, on a terminal, as each ends)
  };

  CompileProgress(Display display, MonotonicClock clock, TextWriter write);
  ~CompileProgress();
  CompileProgress(const CompileProgress&) = delete;
  CompileProgress& operator=(const CompileProgress&) = delete;
  // On stderr, as a terminal when stderr is one (and TERM is not "dumb"), as wide as COLUMNS
  // says, else as the terminal says, else 80.
  static std::unique_ptr<CompileProgress> to_stderr();

  // A run of `jobs` in `slots` slots begins (on a terminal: log messages clear the line now).
  // With several `groups` (the packages of a plan: Job::group), the line counts them too.
  void begin(const std::vector<Job>& jobs, int slots, const std::vector<std::string>& groups = {});
  void started(std::size_t job);
  // The job ran and ended well after `seconds`.
  void finished(std::size_t job, double seconds);
  // The job's gate said Done: its output was restored from the object cache.
  void gated_done(std::size_t job);
  // The job failed, or was skipped because one it waits for failed.
  void failed(std::size_t job);
  // Time passed: on a terminal the line is drawn again when it is due.
  void tick();
  // The run ended (well or not): the line is cleared, log messages are left alone.
  void end();

  // The seconds left, from how long the jobs that ended took: the work left over the slots, or
  // the longest chain of jobs left where that is longer. Negative when there is no basis: no job
  // has ended yet, or one running is of a class none of whose jobs has ended and has run longer
  // than all that ended took.
  double estimate_left(double now) const;

 private:
  struct Class {
    double seconds = 0;
    int count = 0;
  };
  double job_left(std::size_t job, double now) const;
  double chain_left(std::size_t job, const std::vector<double>& left,
                    std::vector<double>& chain) const;
  void line(std::string_view text);
  void maybe_draw(double now);
  void draw(double now);
  std::string status(double now) const;
  std::string packages() const;
  void ended(std::size_t job);
  void hide();
  void show();

  Display display_;
  MonotonicClock clock_;
  TextWriter write_;
  std::vector<std::string> labels_;  // as a terminal may show them
  std::vector<int> classes_, weights_;
  std::vector<std::vector<std::size_t>> deps_;
  std::vector<bool> steps_;                            // per job: one of kiln's own steps
  std::vector<std::size_t> group_of_;                  // per job
  std::vector<std::size_t> group_jobs_, group_ended_;  // per group
  std::vector<bool> group_started_, group_failed_;
  std::size_t failed_ = 0;
  std::vector<double> started_;  // per job: when it started; kWaiting, kEnded
  std::map<int, Class> ran_;     // per class: the jobs that ran and ended
  Class all_;
  std::size_t done_ = 0, running_ = 0;
  int slots_ = 1;
  double begun_ = 0, drawn_at_ = -1;
  double last_line_ = 0;    // when the last line of its own was written
  std::string text_;        // the status line last drawn
  bool on_screen_ = false;  // it is on the terminal now
  bool active_ = false;     // between begin() and end()
};

}  // namespace kiln::compile
