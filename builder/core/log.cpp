#include "core/log.h"

#include <cstdio>
#include <mutex>
#include <string>

#include "core/terminal.h"

namespace kiln::log {

namespace {
int g_verbosity = 0;
std::mutex g_mutex;
std::function<void()> g_hide, g_show;  // set_status_line's

void emit(std::string_view prefix, std::string_view line) {
  std::lock_guard lock(g_mutex);
  std::string text;
  text.reserve(prefix.size() + line.size() + 1);
  text.append(prefix).append(terminal_text(line));
  if (text.empty() || text.back() != '\n') text += '\n';
  if (g_hide) g_hide();
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  if (g_show) g_show();
}
}  // namespace

void set_verbosity(int level) {
  g_verbosity = level;
}
int verbosity() {
  return g_verbosity;
}

void info(std::string_view line) {
  if (g_verbosity >= 0) emit("kiln: ", line);
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

void set_status_line(std::function<void()> hide, std::function<void()> show) {
  std::lock_guard lock(g_mutex);
  g_hide = std::move(hide);
  g_show = std::move(show);
}

}  // namespace kiln::log
