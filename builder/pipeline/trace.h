// A run's jobs as Chrome trace-event JSON (what Perfetto's UI and chrome://tracing open): one
// track per lane of the pool (a slot a job ran in; lane 0 is kiln's own thread: preparations,
// restores from the object cache and each package's wheel), one complete ("X") slice per job with
// its package, unit, arch, slots and verdict.
#pragma once

#include <nlohmann/json.hpp>

#include "pipeline/pipeline.h"

namespace kiln::pipeline {

nlohmann::json trace_json(const Result& result);

}  // namespace kiln::pipeline
