// Text from strangers on a terminal.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kiln {

// `text` safe to print on a terminal, whatever bytes a stranger chose. UTF-8 is decoded strictly:
// a byte that does not start a well-formed character (0x80-0xff outside a valid sequence, a
// truncated sequence, an overlong form, a surrogate, anything past U+10FFFF) is shown as "\\x9b";
// every control character but line feed and tab (C0, DEL: escape sequences, carriage returns,
// backspaces that could hide or forge what kiln says) as "\\x1b", a C1 control (U+0080..U+009F,
// well-formed) as "U+009B", and so are the bidirectional controls (U+061C, U+200E, U+200F,
// U+202A..U+202E, U+2066..U+2069: "U+202E" shows a name reversed) and the line and paragraph
// separators U+2028, U+2029; every other character as it is. Without `keep_newlines`, line feeds
// too (one field of a line, which must not start a forged line). The result is valid UTF-8.
std::string terminal_text(std::string_view text, bool keep_newlines = true);

// `text` as one field of a line (terminal_text without newlines); when that is longer than
// `max_bytes`, cut at a character's start within them and marked "…" (3 bytes more).
std::string terminal_field(std::string_view text, std::size_t max_bytes);

// What a progress display (fetch's downloads, compile's jobs) draws with: a monotonic clock and a
// writer, given by the caller so that tests run one without a terminal, and stderr's facts.
using MonotonicClock = std::function<double()>;            // seconds
using TextWriter = std::function<void(std::string_view)>;  // text as it is
struct StderrDisplay {
  bool terminal = false;  // stderr is a terminal and TERM is not "dumb"
  int columns = 80;       // COLUMNS, else what the terminal says, else 80
  MonotonicClock clock;   // steady_clock
  TextWriter write;       // to stderr, flushed
};
StderrDisplay stderr_display();

// A duration as a progress line shows it: "41 s", "3 min 05 s", "1 h 02 min" ("?" when unknown).
std::string format_seconds(double seconds);

}  // namespace kiln
