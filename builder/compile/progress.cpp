#include "compile/progress.h"

#include <algorithm>

#include "core/log.h"
#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::compile {

namespace {

constexpr double kRedrawSeconds = 0.25;  // at most 4 redraws a second
constexpr double kQuietSeconds = 20;     // without a terminal: a summary after this long silent
constexpr double kNotStarted = -1, kFinished = -2;
constexpr const char* kClear = "\r\x1b[K";

// `text` cut to fit a line of `width` columns with the last one left empty (no wrap), ending in
// "…" when it was cut, at a character's start. Every character is taken as one column wide.
std::string fit(const std::string& text, int width) {
  const std::size_t most = static_cast<std::size_t>(std::max(width, 10)) - 1;
  std::size_t at = 0, cut = 0;
  for (std::size_t chars = 0; at < text.size(); ++chars) {
    if (chars == most - 1) cut = at;
    if (chars == most) return text.substr(0, cut) + "…";
    std::size_t n = utf8_char_length(text, at);
    at += n > 0 ? n : 1;
  }
  return text;
}

}  // namespace

CompileProgress::CompileProgress(Display display, MonotonicClock clock, TextWriter write)
    : display_(display), clock_(std::move(clock)), write_(std::move(write)) {}

CompileProgress::~CompileProgress() {
  end();
}

std::unique_ptr<CompileProgress> CompileProgress::to_stderr() {
  StderrDisplay out = stderr_display();
  Display display{out.terminal, out.columns, log::verbosity() > 0};
  return std::make_unique<CompileProgress>(display, out.clock, out.write);
}

void CompileProgress::begin(const std::vector<Job>& jobs, int slots,
                            const std::vector<std::string>& groups) {
  end();
  const std::size_t n_groups = std::max<std::size_t>(groups.size(), 1);
  group_of_.clear();
  group_jobs_.assign(groups.size() > 1 ? n_groups : 0, 0);
  group_ended_.assign(group_jobs_.size(), 0);
  group_started_.assign(group_jobs_.size(), false);
  group_failed_.assign(group_jobs_.size(), false);
  failed_ = 0;
  labels_.clear();
  classes_.clear();
  weights_.clear();
  deps_.clear();
  steps_.clear();
  slots_ = std::max(slots, 1);
  for (const auto& job : jobs) {
    labels_.push_back(terminal_text(job.label, /*keep_newlines=*/false));
    classes_.push_back(job.job_class);
    weights_.push_back(std::clamp(job.weight, 1, slots_));
    deps_.push_back(job.deps);
    steps_.push_back(static_cast<bool>(job.step));
    const auto g = static_cast<std::size_t>(std::max(job.group, 0));
    group_of_.push_back(g < group_jobs_.size() ? g : group_jobs_.size());
    if (g < group_jobs_.size()) group_jobs_[g]++;
  }
  started_.assign(jobs.size(), kNotStarted);
  ran_.clear();
  all_ = {};
  done_ = running_ = 0;
  begun_ = clock_();
  last_line_ = begun_;
  drawn_at_ = -1;
  active_ = true;
  if (display_.terminal) log::set_status_line([this] { hide(); }, [this] { show(); });
}

// A job ended, however: its package's count.
void CompileProgress::ended(std::size_t job) {
  started_[job] = kFinished;
  if (group_of_[job] < group_jobs_.size()) group_ended_[group_of_[job]]++;
}

void CompileProgress::started(std::size_t job) {
  const double now = clock_();
  started_[job] = now;
  if (group_of_[job] < group_jobs_.size()) group_started_[group_of_[job]] = true;
  ++running_;
  if (display_.verbose) line(cat("start ", labels_[job]));
  maybe_draw(now);
}

void CompileProgress::finished(std::size_t job, double seconds) {
  const bool ran = started_[job] >= 0;  // else one of kiln's own steps (Job::step)
  if (ran) --running_;
  ended(job);
  ++done_;
  if (ran) {
    Class& c = ran_[classes_[job]];
    c.seconds += seconds;
    c.count++;
    all_.seconds += seconds;
    all_.count++;
  }
  if (!display_.terminal || display_.verbose)
    line(cat("[", done_, "/", labels_.size(), "] ", labels_[job], " (",
             static_cast<int>(seconds + 0.5), " s)"));
  maybe_draw(clock_());
}

void CompileProgress::gated_done(std::size_t job) {
  ended(job);
  ++done_;
  if (!display_.terminal || display_.verbose)
    line(cat("[", done_, "/", labels_.size(), "] ", labels_[job], " (restored)"));
  maybe_draw(clock_());
}

void CompileProgress::failed(std::size_t job) {
  if (started_[job] >= 0) --running_;
  ended(job);
  ++done_;
  ++failed_;
  if (group_of_[job] < group_jobs_.size()) group_failed_[group_of_[job]] = true;
  if (!display_.terminal || display_.verbose)
    line(cat("[", done_, "/", labels_.size(), "] ", labels_[job], " (failed)"));
  maybe_draw(clock_());
}

void CompileProgress::tick() {
  maybe_draw(clock_());
}

void CompileProgress::end() {
  if (!active_) return;
  active_ = false;
  if (!display_.terminal) return;
  log::set_status_line({}, {});
  hide();
  text_.clear();
  if (done_ == labels_.size() && done_ > 0 && failed_ == 0)
    write_(cat("kiln: [", done_, "/", labels_.size(), "] jobs done in ",
               format_seconds(clock_() - begun_), "\n"));
}

// What a job not ended has left to run: the mean time of the jobs of its class that ended (of
// all that ended, for a class none of whose jobs has), less what it has run (none left once it
// ran longer); -1 (no basis) for a job of a class none of whose jobs has ended that has run
// longer than all that ended took.
double CompileProgress::job_left(std::size_t job, double now) const {
  if (steps_[job]) return 0;  // kiln's own steps take a moment
  auto c = ran_.find(classes_[job]);
  const Class& basis = c != ran_.end() ? c->second : all_;
  const double mean = basis.seconds / basis.count;
  if (started_[job] < 0) return mean;
  const double run = now - started_[job];
  if (c == ran_.end() && run > mean) return -1;
  return std::max(0.0, mean - run);
}

// The longest chain of jobs left that ends with `job` (its deps not ended first), memoized.
double CompileProgress::chain_left(std::size_t job, const std::vector<double>& left,
                                   std::vector<double>& chain) const {
  if (chain[job] >= 0) return chain[job];
  chain[job] = left[job];  // what a cycle of deps would find
  double before = 0;
  for (std::size_t d : deps_[job])
    if (started_[d] != kFinished) before = std::max(before, chain_left(d, left, chain));
  return chain[job] = before + left[job];
}

double CompileProgress::estimate_left(double now) const {
  if (all_.count == 0) return -1;
  std::vector<double> left(started_.size(), 0), chain(started_.size(), -1);
  double work = 0;
  for (std::size_t i = 0; i < started_.size(); ++i)
    if (started_[i] != kFinished) {
      left[i] = job_left(i, now);
      if (left[i] < 0) return -1;
      work += left[i] * weights_[i];
    }
  double longest = 0;
  for (std::size_t i = 0; i < started_.size(); ++i)
    if (started_[i] != kFinished) longest = std::max(longest, chain_left(i, left, chain));
  return std::max(work / slots_, longest);
}

// A line of its own: on a terminal, above the status line.
void CompileProgress::line(std::string_view text) {
  last_line_ = clock_();
  hide();
  write_(cat("kiln: ", text, "\n"));
  show();
}

void CompileProgress::maybe_draw(double now) {
  if (!active_) return;
  if (!display_.terminal) {  // a log: never silent for long while jobs run
    if (now - last_line_ >= kQuietSeconds && done_ < labels_.size()) line(status(now));
    return;
  }
  if (drawn_at_ >= 0 && now - drawn_at_ < kRedrawSeconds) return;
  draw(now);
}

void CompileProgress::draw(double now) {
  drawn_at_ = now;
  std::string text = status(now);
  if (on_screen_ && text == text_) return;
  write_(cat(kClear, text));
  text_ = std::move(text);
  on_screen_ = true;
}

// "packages 1/3 done, 2 building, 1 failed; " for a plan of several packages, else "".
std::string CompileProgress::packages() const {
  if (group_jobs_.empty()) return "";
  std::size_t done = 0, building = 0, failed = 0;
  for (std::size_t g = 0; g < group_jobs_.size(); ++g) {
    if (group_failed_[g])
      ++failed;
    else if (group_ended_[g] == group_jobs_[g])
      ++done;
    else if (group_started_[g] || group_ended_[g] > 0)
      ++building;
  }
  return cat("packages ", done, "/", group_jobs_.size(), " done, ", building, " building",
             failed ? cat(", ", failed, " failed") : std::string(), "; ");
}

// "[12/40] 2 min 10 s, ~3 min 05 s left; 3 running, longest 65 s: nvcc x.cu sm_90", as wide as
// the terminal; a plan's packages first.
std::string CompileProgress::status(double now) const {
  std::string text =
      cat(packages(), "[", done_, "/", labels_.size(), "] ", format_seconds(now - begun_));
  if (double left = estimate_left(now); left >= 0 && done_ < labels_.size())
    text += cat(", ~", format_seconds(left), " left");
  std::size_t longest = started_.size();
  for (std::size_t i = 0; i < started_.size(); ++i)
    if (started_[i] >= 0 && (longest == started_.size() || started_[i] < started_[longest]))
      longest = i;
  if (longest < started_.size())
    text += cat("; ", running_, " running, longest ", format_seconds(now - started_[longest]), ": ",
                labels_[longest]);
  return fit(text, display_.columns);
}

void CompileProgress::hide() {
  if (on_screen_) write_(kClear);
  on_screen_ = false;
}

void CompileProgress::show() {
  if (on_screen_ || text_.empty() || !active_) return;
  write_(cat(kClear, text_));
  on_screen_ = true;
}

}  // namespace kiln::compile
