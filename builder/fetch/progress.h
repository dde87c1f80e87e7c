// What a long download shows on stderr. On a terminal: one line, rewritten in place at most
// 4 times a second, with the bytes so far, the size, the rate and the time left. Elsewhere (a log,
// a pipe): the same as a line of its own after 20 s without one ("fetching <file>  412.3 MB /
// 912.3 MB …"), so a CI log is never silent for long, and one line per file when it completes
// ("fetched <file> 912.3 MB in 41 s"). The clock and the writer are the caller's, so tests run it
// without a terminal.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/terminal.h"

namespace kiln::fetch {

class DownloadProgress {
 public:
  DownloadProgress(bool terminal, MonotonicClock clock, TextWriter write);
  // On stderr, as a terminal when stderr is one (and TERM is not "dumb").
  static std::unique_ptr<DownloadProgress> to_stderr();

  // A transfer of `name` begins; `total` is its size in bytes (0: unknown), `already` what a
  // resumed transfer has from before.
  void start(std::string name, std::uint64_t total, std::uint64_t already);
  // `received` bytes of this transfer so far (`total` from the answer when start() knew none).
  void update(std::uint64_t received, std::uint64_t total);
  // The file is complete (`bytes` in all): the line that says so.
  void done(std::uint64_t bytes);
  // The transfer stopped (an error, a retry): a terminal's line is cleared, for the message.
  void clear();

  // "912.3 MB", "1.2 kB", "17 B" (decimal units, as pip shows them).
  static std::string format_bytes(std::uint64_t bytes);

 private:
  void draw(double now);
  std::string status(double now) const;  // "<file>  412.3 MB / 912.3 MB  10.2 MB/s  ETA 49 s"

  bool terminal_;
  MonotonicClock clock_;
  TextWriter write_;
  std::string name_;
  std::uint64_t total_ = 0, already_ = 0, received_ = 0;
  double started_ = 0, drawn_at_ = -1;
  double line_at_ = 0;  // without a terminal: when the last line was written
  bool shown_ = false;  // a terminal line is on the screen
};

}  // namespace kiln::fetch
