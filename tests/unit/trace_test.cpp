// pipeline::trace_json: the jobs as Chrome trace-event JSON — a complete slice per job the pool ran
// (lane = track), a track name per lane, the build's figures; timings seen inside a job (lane -1)
// left out.
#include "pipeline/trace.h"

#include <gtest/gtest.h>

namespace kiln::pipeline {

namespace {

using Verdict = compile::JobStats::Verdict;

JobRecord record(std::string label, double start, double seconds, int lane, Verdict verdict,
                 std::string package, std::string unit = "", std::string arch = "") {
  compile::JobStats::Timing t{std::move(label), seconds, 2048, seconds * 0.9, start, lane, 1,
                              verdict,          0};
  return {t, std::move(package), "1.0", "default", std::move(unit), std::move(arch)};
}

}  // namespace

TEST(Trace, OneCompleteSlicePerJobOnItsLaneWithWhoseItWas) {
  Result r;
  r.jobs = {
      record("prepare a", 0, 0.5, 0, Verdict::Step, "a"),
      record("nvcc x.cu[0/2] sm_90", 0.5, 10, 1, Verdict::Compiled, "a", "x.cu[0/2]", "sm_90"),
      record("nvcc y.cu sm_90", 0.5, 4, 2, Verdict::Compiled, "b", "y.cu", "sm_90"),
      record("nvcc z.cu sm_90", 4.5, 0.0000001, 0, Verdict::Restored, "b", "z.cu", "sm_90"),
      record("ninja z.o", 0, 3, -1, Verdict::Compiled, "c"),
      record("wheel a (default)", 10.5, 0.2, 0, Verdict::Step, "a")};
  r.floor = {11, 12.6, 10, 2, 10};
  nlohmann::json t = trace_json(r);
  const auto& events = t.at("traceEvents");
  std::vector<nlohmann::json> slices, names;
  for (const auto& e : events) (e.at("ph") == "X" ? slices : names).push_back(e);
  ASSERT_EQ(slices.size(), 5u);  // ninja's compile is not the pool's
  const auto& x = slices[1];
  EXPECT_EQ(x.at("name"), "nvcc x.cu[0/2] sm_90");
  EXPECT_EQ(x.at("ts"), 500000);
  EXPECT_EQ(x.at("dur"), 10000000);
  EXPECT_EQ(x.at("pid"), 1);
  EXPECT_EQ(x.at("tid"), 1);
  EXPECT_EQ(x.at("args").at("package"), "a");
  EXPECT_EQ(x.at("args").at("unit"), "x.cu[0/2]");
  EXPECT_EQ(x.at("args").at("arch"), "sm_90");
  EXPECT_EQ(x.at("args").at("slots"), 1);
  EXPECT_EQ(x.at("args").at("verdict"), "compiled");
  EXPECT_DOUBLE_EQ(x.at("args").at("cpu_seconds").get<double>(), 9);
  EXPECT_EQ(slices[3].at("args").at("verdict"), "restored");
  EXPECT_EQ(slices[3].at("dur"), 1);  // at least a microsecond: a viewer drops empty slices
  EXPECT_FALSE(slices[3].at("args").contains("cpu_seconds"));
  EXPECT_EQ(slices[0].at("args").at("verdict"), "kiln");
  EXPECT_FALSE(slices[0].at("args").contains("unit"));
  // The process and each lane named: kiln's own thread, then the slots.
  std::map<int, std::string> lanes;
  for (const auto& m : names) {
    EXPECT_EQ(m.at("ph"), "M");
    if (m.at("name") == "thread_name") lanes[m.at("tid")] = m.at("args").at("name");
  }
  EXPECT_EQ(lanes, (std::map<int, std::string>{{0, "kiln"}, {1, "slot 1"}, {2, "slot 2"}}));
  EXPECT_EQ(t.at("otherData").at("floor_seconds"), 10);
  EXPECT_EQ(t.at("displayTimeUnit"), "ms");
}

}  // namespace kiln::pipeline
