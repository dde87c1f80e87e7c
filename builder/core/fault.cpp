#include "core/fault.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/strings.h"

namespace kiln::detail {

namespace {

struct FaultSpec {
  std::string point;
  long nth = 1;
  bool stop = false;
  std::mutex mutex;
  std::map<std::string, long, std::less<>> seen;  // arrivals per point

  FaultSpec() {
    const char* text = std::getenv("KILN_FAULT");
    auto parts = split(text ? text : "", ":", /*skip_empty=*/false);
    if (!parts.empty()) point = parts[0];
    for (std::size_t i = 1; i < parts.size(); ++i) {
      if (parts[i] == "stop")
        stop = true;
      else
        nth = std::atol(parts[i].c_str());
    }
  }
};

FaultSpec& spec() {
  static FaultSpec s;
  return s;
}

}  // namespace

const bool g_fault_armed = [] {
  const char* text = std::getenv("KILN_FAULT");
  return text != nullptr && *text != '\0';
}();

void fault_reached(std::string_view point) {
  FaultSpec& s = spec();
  long n = 0;
  {
    std::lock_guard<std::mutex> hold(s.mutex);
    auto it = s.seen.find(point);
    if (it == s.seen.end()) it = s.seen.emplace(std::string(point), 0).first;
    n = ++it->second;
  }
  std::string line = cat("kiln: fault point ", point, " #", n, "\n");
  [[maybe_unused]] auto ignored = ::write(2, line.data(), line.size());
  if (point == s.point && n == s.nth) ::raise(s.stop ? SIGSTOP : SIGKILL);
}

}  // namespace kiln::detail
