#include "core/log.h"

#include <cstdio>
#include <mutex>
#include <string>

#include "core/terminal.h"

namespace kiln::log {

namespace {
int g_verbosity = 0;
std::mutex g_mutex;

void emit(std::string_view prefix, std::string_view line) {
  std::lock_guard lock(g_mutex);
  std::string text;
  text.reserve(prefix.size() + line.size() + 1);
  text.append(prefix).append(terminal_text(line));
  if (text.empty() || text.back() != '\n') text += '\n';
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}
}  // namespace

void set_verbosity(int level) {
  g_verbosity = level;
}
int verbosity() {
  return g_verbosity;
}

void info(std::string_view line) {
  emit("kiln: ", line);
}
void verbose(std::string_view line) {
  if (g_verbosity > 0) emit("kiln: ", line);
}
void warn(std::string_view line) {
  emit("kiln: warning: ", line);
}
void error(std::string_view line) {
  emit("kiln: error: ", line);
}
void raw(std::string_view text) {
  emit("", text);
}

}  // namespace kiln::log
