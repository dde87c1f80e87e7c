#include "core/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/strings.h"

namespace kiln {

namespace {

// The characters that reorder text around them (Unicode's bidirectional controls: the marks,
// embeddings, overrides and isolates), with which a name can be shown as another.
bool is_bidi_control(std::uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

std::string terminal_text(std::string_view s, bool keep_newlines) {
  auto is_control = [&](std::uint32_t cp) {
    return (cp < 0x20 && !(cp == '\n' && keep_newlines) && cp != '\t') ||
           (cp >= 0x7f && cp <= 0x9f) || is_bidi_control(cp) || cp == 0x2028 || cp == 0x2029;
  };
  // What to show for the bytes at i ("" when they stay as they are); `length` is how many.
  auto shown = [&](std::size_t i, std::size_t& length) -> std::string {
    char buf[8];
    std::uint32_t cp = 0;
    length = utf8_char_length(s, i, &cp);
    if (length == 0) {  // not the start of a well-formed character: this byte alone
      length = 1;
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(s[i]));
      return buf;
    }
    if (!is_control(cp)) return "";
    std::snprintf(buf, sizeof buf, cp < 0x80 ? "\\x%02x" : "U+%04X", static_cast<unsigned>(cp));
    return buf;
  };
  std::string out;
  std::size_t copied = 0;  // s[copied, i) goes out as it is
  for (std::size_t i = 0, length = 0; i < s.size(); i += length) {
    std::string instead = shown(i, length);
    if (instead.empty()) continue;
    out.append(s.substr(copied, i - copied)).append(instead);
    copied = i + length;
  }
  if (copied == 0) return std::string(s);
  return out.append(s.substr(copied));
}

std::string terminal_field(std::string_view text, std::size_t max_bytes) {
  std::string out = terminal_text(text, /*keep_newlines=*/false);
  if (out.size() <= max_bytes) return out;
  std::size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
  out.resize(cut);
  return out + "…";
}

namespace {

int terminal_columns() {
  if (const char* env = std::getenv("COLUMNS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  ::winsize ws{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

}  // namespace

StderrDisplay stderr_display() {
  StderrDisplay d;
  const char* term = std::getenv("TERM");
  d.terminal = ::isatty(STDERR_FILENO) == 1 && !(term && std::strcmp(term, "dumb") == 0);
  d.columns = d.terminal ? terminal_columns() : 80;
  d.clock = [] {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
  };
  d.write = [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
  return d;
}

std::string format_seconds(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  auto s = static_cast<long long>(std::llround(seconds));
  auto two = [](long long v) { return v < 10 ? cat("0", v) : cat(v); };
  if (s < 60) return cat(s, " s");
  if (s < 3600) return cat(s / 60, " min ", two(s % 60), " s");
  return cat(s / 3600, " h ", two(s / 60 % 60), " min");
}

}  // namespace kiln
