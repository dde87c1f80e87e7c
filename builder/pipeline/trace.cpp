#include "pipeline/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>

#include "core/strings.h"

namespace kiln::pipeline {

namespace {

using nlohmann::json;
using Verdict = compile::JobStats::Verdict;

std::int64_t microseconds(double seconds) {
  return static_cast<std::int64_t>(std::llround(seconds * 1e6));
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Compiled:
      return "compiled";
    case Verdict::Restored:
      return "restored";
    case Verdict::Step:
      return "kiln";
  }
  return "compiled";
}

json metadata(const char* name, int tid, const std::string& value) {
  return {{"name", name}, {"ph", "M"}, {"pid", 1}, {"tid", tid}, {"args", {{"name", value}}}};
}

}  // namespace

json trace_json(const Result& result) {
  json events = json::array();
  events.push_back(metadata("process_name", 0, "kiln build"));
  std::set<int> lanes;
  for (const auto& j : result.jobs) {
    const auto& t = j.timing;
    if (t.lane < 0) continue;  // seen inside a job (setuptools' ninja), not run by the pool
    lanes.insert(t.lane);
    json args = {{"package", j.package},
                 {"version", j.version},
                 {"target", j.target},
                 {"slots", t.slots},
                 {"verdict", verdict_name(t.verdict)}};
    if (!j.unit.empty()) args["unit"] = j.unit;
    if (!j.arch.empty()) args["arch"] = j.arch;
    if (t.verdict == Verdict::Compiled) {
      args["cpu_seconds"] = t.cpu_seconds;
      args["max_rss_kib"] = t.max_rss_kib;
    }
    events.push_back({{"name", t.label},
                      {"cat", verdict_name(t.verdict)},
                      {"ph", "X"},
                      {"ts", microseconds(t.start)},
                      {"dur", std::max<std::int64_t>(microseconds(t.seconds), 1)},
                      {"pid", 1},
                      {"tid", t.lane},
                      {"args", std::move(args)}});
  }
  for (int lane : lanes)
    events.push_back(metadata("thread_name", lane, lane == 0 ? "kiln" : cat("slot ", lane)));
  const Floor& f = result.floor;
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"wall_seconds", f.wall_seconds},
            {"cpu_seconds", f.cpu_seconds},
            {"longest_job_seconds", f.longest_job_seconds},
            {"slots", f.slots},
            {"floor_seconds", f.floor_seconds}}}};
}

}  // namespace kiln::pipeline
