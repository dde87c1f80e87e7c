// The native backend's plan (ninja's Plan): translation units and nvcc's dry-run text in, a job
// graph out, without running anything or writing anything (the build root and the cache are as
// they were). The graph is a pure function of its inputs and of what the object cache holds: a
// job whose output the cache holds is a restore job, which puts it in place when it runs (and
// runs its command after all when the entry is gone or damaged by then).
//
// Per translation unit: a C++ source is one compile. A CUDA source, where its dry runs split as
// nvcc_split.h knows, is one device job per arch, a host job, a fat-binary job and, when the
// device parts are fewer than the slots, a front-end job that gives the host job its stub early;
// otherwise one nvcc for all archs. Each extension is one link of its units' objects.
//
// Cache keys are the sha256 of the object salt (the toolchain's identity), the job's kind and its
// exact commands. The host part's key holds the front end's commands (where its stub and module
// id come from), not the device parts': it is the same for every arch set with the same lowest
// arch, so adding an arch reruns only the new arch's device jobs and the fat binaries.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "compile/jobs.h"
#include "compile/native.h"
#include "compile/object_cache.h"
#include "core/expected.h"

namespace kiln::compile {

// One translation unit: a source, or one shard of it.
struct Unit {
  const manifest::Extension* ext = nullptr;
  std::string source;                // relative to src/
  std::vector<std::string> defines;  // the shard's
  std::string tag;                   // "csrc_x.cu" or "csrc_x.cu.2-of-9": names its files
  std::string name;                  // "x.cu" or "x.cu[2/9]": names its jobs
  double share = 1;                  // its part of the source's units
  bool sharded = false;              // the source is declared shardable
  // What its compile parses of the package's tree (the source and the headers it includes, in
  // bytes): its jobs' estimates scale with it.
  double source_bytes = 0;
  std::filesystem::path object;
  std::filesystem::path fatbin_object;  // a CUDA unit's fat binary, when its host part is split off
};

// The translation units, in link order: each extension's sources, a shardable one as the number
// of shards resolve chose (ctx.shards). Their source_bytes are left 0.
std::vector<Unit> translation_units(const NativeContext& ctx);

// nvcc's dry runs for the CUDA units (none when `arch_list` is empty): per unit, one per arch
// (that arch's device part), then the host part's, the fat binary's and the front end's.
struct DryRuns {
  std::vector<std::vector<std::string>> commands;
  std::vector<std::size_t> first;                  // per unit, the index of its first command
  std::vector<std::filesystem::path> directories;  // the keep directories they name
};
DryRuns dry_run_commands(const NativeContext& ctx, const std::vector<Unit>& units,
                         const std::string& arch_list);

// What a job is: its rank among ready jobs (schedule()) and the progress line's basis for the time
// left.
enum class JobClass {
  Restore,          // outputs the object cache holds: restored when their gate is asked
  HostOrFatBinary,  // host parts and fat binaries: they unblock links
  ShardedDevice,    // device parts (or one nvcc for all archs) of shardable sources
  HostCxx,          // host C++ sources
  Device,           // other device parts and one-nvcc-for-all-archs jobs
  FrontEnd,         // front ends: a few seconds each
  Link,
};

struct GraphJob {
  Job job;  // its deps index JobGraph::jobs
  JobClass job_class;
  double estimate;  // its work, for the order among ready jobs of a class (larger first)
};

struct JobGraph {
  std::vector<GraphJob> jobs;  // in planning order
  std::vector<BuiltModule> modules;
  std::vector<std::filesystem::path> directories;  // to create before the jobs run
  // Set when a job that only restores found its entry gone (evicted or damaged since the plan)
  // and stopped the run: nothing planned makes that output, so the build plans again.
  std::shared_ptr<bool> stale = std::make_shared<bool>(false);
};

struct PlanInput {
  const NativeContext* ctx = nullptr;
  std::vector<Unit> units;
  // __CUDA_ARCH_LIST__ for every arch this nvcc knows (nvcc_split.h); "" when it could not say:
  // every CUDA unit is then one nvcc for all archs.
  std::string arch_list;
  DryRuns dry_runs;
  std::vector<Expected<std::string>> dry_outputs;  // nvcc's output for each dry-run command
  // What nvcc's commands run after (`unshare --pid ...`): cudafe++ names anonymous namespaces
  // after its PID. Empty where PID namespaces are not permitted.
  std::vector<std::string> pid_prefix;
  int slots = 1;
};

// Plans every unit and link, reading what `cache` holds (ObjectCache's probes) and writing
// nothing. A hit is a restore job: a job whose gate restores the output to the path its command
// would write and says Done (the runner counts it in JobStats::gated_done), else runs the command;
// a host part or fat binary whose device parts were not planned (the cache held it all) is a
// restore alone. Its consumers depend on it as on any job. The planned jobs restore from and
// store what they make into `cache`, so it must outlive them.
JobGraph plan_jobs(PlanInput input, ObjectCache& cache);

// The graph's jobs in the order the runner starts ready ones, their deps renumbered.
std::vector<Job> schedule(JobGraph graph);

}  // namespace kiln::compile
