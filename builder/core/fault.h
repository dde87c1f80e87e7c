// A test hook for fault injection: with KILN_FAULT=<point>[:<nth>][:stop] in the environment, the
// nth time (default 1) the process reaches fault_point("<point>") it raises SIGKILL on itself
// (":stop": SIGSTOP, so a test can act while it is frozen at that point, then SIGCONT it). While
// KILN_FAULT is set, every arrival at any point is reported on stderr ("kiln: fault point <point>
// #<n>"), so a test can count the arrivals of a build (KILN_FAULT=none). Unset, a point costs one
// load and one branch. The points are listed in docs/reliability.md.
#pragma once

#include <string_view>

namespace kiln {

namespace detail {
extern const bool g_fault_armed;  // KILN_FAULT was set when the process started
void fault_reached(std::string_view point);
}  // namespace detail

inline void fault_point(std::string_view point) {
  if (detail::g_fault_armed) [[unlikely]]
    detail::fault_reached(point);
}

}  // namespace kiln
