// Resolve: manifests + targets -> the plan, one item per (package, target), each with its build
// key: sha256 over a canonical serialisation of every input that can change the wheel's bytes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/repository.h"
#include "packaging/marker.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::resolve {

// Bump by hand whenever kiln changes how it turns the same inputs into different bytes.
constexpr int kRecipeVersion = 6;  // 2: nvcc in a PID namespace; 3: shards, per-arch device jobs;
                                   // 4: the toolkit through <root>/cuda; 5: compat headers (the
                                   // manylinux floor), Metadata 2.4, upstream's metadata; 6: the
                                   // build root named by the package alone, libm's compat header,
                                   // nvcc --threads dropped from setuptools builds and
                                   // their sources' mtimes fixed

// A target with what kiln learned about its toolchain on this machine.
// A plan of pure packages only probes nothing: then only `target` is set.
struct ResolvedTarget {
  manifest::Target target;
  nlohmann::json toolchain;  // probed identities (python, cuda, cxx, torch wheel): the key's part
  std::string python_tag;    // "cp311"
  // What the probes found, kept so that the build never probes a second time.
  std::optional<toolchain::PythonInfo> python;
  std::optional<toolchain::HostCompiler> cxx;
  // The system toolkit. A toolkit of pinned wheels is laid out when a build first needs it.
  std::optional<toolchain::CudaToolkit> cuda;
  // A torch from an environment. A pinned wheel's is unpacked when a build first needs it.
  std::optional<toolchain::TorchSysroot> torch;
  // The glibc minor compiled wheels are built for and tagged with (manylinux_2_<minor>): the
  // target's `manylinux`, else its torch's own floor (so they install wherever that torch does).
  int manylinux = 28;
};

// One package for one target: what its build needs, typed, and its key. `inputs` (what the key
// hashes, recorded in kiln.json and diffed by --explain) is written from the same values; nothing
// reads it back.
struct PlanItem {
  const manifest::Manifest* manifest = nullptr;
  std::string target_name;
  std::string key;  // 64 hex digits: sha256 of `inputs`
  // What the build root is named after: the package's normalised name alone, so that its path (in
  // every object) stays when a patch, the source or the version changes, and the object cache
  // reuses every unit whose inputs did not change.
  std::string root_key;
  // Compiled backends: the tools' identities a compile job depends on beyond its commands (the
  // object cache's salt, compile/content_key.h); "" for pure packages.
  std::string object_salt;
  // Shard counts of shardable sources (the native backend): "<extension>/<source>" -> n.
  std::map<std::string, int> shards;
  nlohmann::json inputs;
};

struct Plan {
  std::vector<ResolvedTarget> targets;
  std::vector<PlanItem> items;
  manifest::BuildEnvPins build_env;  // the setuptools backend's pins
  std::vector<std::shared_ptr<const manifest::Manifest>> overridden;  // copies with another backend
  // With skip_unusable_targets: the targets left out, each with why (their probes failed here).
  std::vector<Error> skipped_targets;
  // A line per (argument, target) left out because the argument's marker is false there.
  std::vector<std::string> ignored;
};

// The marker environment a target's wheels install into, as far as kiln knows it: Linux on
// x86_64, CPython, its Python's version ("python_full_version" and "implementation_version" once
// the interpreter was probed); "extra" empty.
packaging::MarkerEnvironment marker_environment(const ResolvedTarget& target);

// What the target asks of the CUDA toolkit, for toolchain::make_cuda_source.
toolchain::CudaRequest cuda_request(const manifest::Target& target);

// How many translation units a shardable source with `units` units is compiled as, for `slots`
// parallel jobs (0: one per core): the fewest shards that keep the largest shard as small as
// min(units, slots, max_shards) shards would (2 slots: 2; 16 slots and 18 units: 9 shards of 2;
// 18+: 18). `max_shards` (0: none) is the manifest's limit, where a shard's repeated front end
// costs more CPU than a smaller shard saves.
int shard_count(int units, int slots, int max_shards = 0);

// `item` with the shard counts a wheel records (`kiln rebuild`) in place of those chosen from the
// cores: the same shardable sources, each count from 1 to its units; its inputs and key again.
Expected<void> use_shards(PlanItem& item, const std::map<std::string, int>& shards);

// The label kiln gives the wheels it compiles for this target ("cu130torch2.11"): its CUDA and the
// minor of its torch (the pinned one, or the environment's once probed).
std::string target_local_label(const ResolvedTarget& target);

// `packages`: requirements as pip reads them (manifest::Repository::select), a marker evaluated
// per target (marker_environment; false: the pair is left out, in Plan::ignored); a local label
// ("==1.7.0+cu130torch2.11") must be the one each target gives the package's wheels, else a
// usage error naming both. Empty: the newest manifest of every package but test fixtures.
// `backend`: build them with this backend instead of their manifests' (it is part of their keys).
// `skip_unusable_targets`: a target whose probes fail here is left out (Plan::skipped_targets)
// instead of failing the plan, unless no target is left.
Expected<Plan> make_plan(const manifest::Repository& repo, const std::vector<std::string>& packages,
                         const std::vector<manifest::Target>& targets, int slots = 0,
                         const manifest::BackendSpec* backend = nullptr,
                         bool skip_unusable_targets = false);

}  // namespace kiln::resolve
