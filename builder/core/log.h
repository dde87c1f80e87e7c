// Progress and diagnostics on stderr. stdout is kept for results (tables, JSON, paths).
#pragma once

#include <functional>
#include <string_view>

namespace kiln::log {

void set_verbosity(int level);  // -1: -q (warnings and errors only), 0: normal, 1: -v, 2: -vv
int verbosity();

void info(std::string_view line);     // "kiln: <line>"
void verbose(std::string_view line);  // only with -v
void warn(std::string_view line);     // "kiln: warning: <line>"
void error(std::string_view line);    // "kiln: error: <line>"
void raw(std::string_view text);      // as is

// A status line kept at the bottom of a terminal (a progress line): every message above calls
// `hide` before it is written and `show` after. Empty functions: none.
void set_status_line(std::function<void()> hide, std::function<void()> show);

}  // namespace kiln::log
