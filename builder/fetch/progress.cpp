#include "fetch/progress.h"

#include <cstdio>

#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::fetch {

namespace {

constexpr double kRedrawSeconds = 0.25;  // at most 4 redraws a second
constexpr double kQuietSeconds = 20;     // without a terminal: a line after this long silent

std::string fixed1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A file name as one field of a terminal line (an index's file names are a stranger's), a very
// long one cut.
std::string printable_name(std::string_view name) {
  return terminal_field(name, 120);
}

}  // namespace

DownloadProgress::DownloadProgress(bool terminal, MonotonicClock clock, TextWriter write)
    : terminal_(terminal), clock_(std::move(clock)), write_(std::move(write)) {}

std::unique_ptr<DownloadProgress> DownloadProgress::to_stderr() {
  StderrDisplay out = stderr_display();
  return std::make_unique<DownloadProgress>(out.terminal, out.clock, out.write);
}

std::string DownloadProgress::format_bytes(std::uint64_t bytes) {
  const char* units[] = {"kB", "MB", "GB", "TB"};
  if (bytes < 1000) return cat(bytes, " B");
  double v = static_cast<double>(bytes) / 1000;
  int unit = 0;
  while (v >= 999.95 && unit < 3) {
    v /= 1000;
    ++unit;
  }
  return cat(fixed1(v), " ", units[unit]);
}

void DownloadProgress::start(std::string name, std::uint64_t total, std::uint64_t already) {
  clear();
  name_ = printable_name(name);
  total_ = total;
  already_ = already;
  received_ = 0;
  started_ = clock_();
  line_at_ = started_;
  drawn_at_ = -1;
}

void DownloadProgress::update(std::uint64_t received, std::uint64_t total) {
  received_ = received;
  if (total_ == 0 && total > 0) total_ = already_ + total;
  double now = clock_();
  if (!terminal_) {  // a log: a line after kQuietSeconds without one, so it is never silent long
    if (now - line_at_ >= kQuietSeconds) {
      line_at_ = now;
      write_(cat("kiln: fetching ", status(now), "\n"));
    }
    return;
  }
  if (received == 0) return;  // nothing to show before the body begins
  if (drawn_at_ >= 0 && now - drawn_at_ < kRedrawSeconds) return;
  draw(now);
}

void DownloadProgress::draw(double now) {
  drawn_at_ = now;
  write_(cat("\r\x1b[K", status(now)));
  shown_ = true;
}

std::string DownloadProgress::status(double now) const {
  const std::uint64_t have = already_ + received_;
  const double elapsed = now - started_;
  const double rate = elapsed > 0 ? static_cast<double>(received_) / elapsed : 0;
  std::string line = cat(name_, "  ", format_bytes(have));
  if (total_ > 0) line += cat(" / ", format_bytes(total_));
  if (rate > 0) line += cat("  ", format_bytes(static_cast<std::uint64_t>(rate)), "/s");
  if (total_ > have && rate > 0)
    line += cat("  ETA ", format_seconds(static_cast<double>(total_ - have) / rate));
  return line;
}

void DownloadProgress::done(std::uint64_t bytes) {
  clear();
  double seconds = clock_() - started_;
  write_(cat("kiln: fetched ", name_, " ", format_bytes(bytes), " in ", format_seconds(seconds),
             "\n"));
}

void DownloadProgress::clear() {
  if (shown_) write_("\r\x1b[K");
  shown_ = false;
}

}  // namespace kiln::fetch
