// Runs a plan: for each (package, target), a cache hit, or fetch -> unpack -> patch -> backend ->
// wheel -> check -> atomic commit, under the key's lock. The compile jobs of every package built
// run in one pool of --jobs slots (ninja's one Plan and one CommandRunner), and each package's
// wheel is written, checked and committed as soon as its own jobs are done; a package that fails
// costs only its own wheel (unless fail_fast).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attest/key.h"
#include "cache/store.h"
#include "compile/jobs.h"
#include "core/expected.h"
#include "core/sandbox.h"
#include "resolve/plan.h"
#include "toolchain/toolchain.h"

namespace kiln::pipeline {

struct Options {
  std::filesystem::path cache;
  int jobs = 0;                  // 0: one per core
  bool offline = false;          // never touch the network
  std::string index_url;         // "" = pip's configuration
  bool explain = false;          // say why each package is (re)built
  bool keep_build_root = false;  // keep each item's build root (sources, objects, logs)
  // The shared remote cache (cache/remote.h), or null: objects and wheels missing locally are
  // taken from it (wheels validated first), what is built is stored there.
  std::shared_ptr<cache::SharedCache> shared;
  // false: take wheels only (the local cache, then the remote); an item in neither is an error
  // (`kiln index export` of a plan).
  bool build = true;
  // Where the compiling backends run a package's code (compile/sandbox.h). A build that will run
  // sandboxed takes no wheel built unsandboxed (its caveats say so) as a hit, local or remote.
  SandboxMode sandbox = SandboxMode::Auto;
  // What each wheel's kiln.json says of kiln: its commit (cli::build_commit()) and version (""
  // = this kiln's). `kiln rebuild` passes the wheel's own, so that only the build can differ.
  std::string kiln_commit;
  std::string kiln_version;
  // With a key, each wheel this run builds (not a hit, local or remote, nor a rebuild) gets its
  // signed attestation beside it in the cache entry (attest/wheel.h).
  std::shared_ptr<const attest::SigningKey> signing_key;
  // Stop every job at the first package that fails (its jobs, its preparation or its checks);
  // else the others are still built and committed.
  bool fail_fast = false;
};

// `kiln rebuild`: one item built afresh.
struct Fresh {
  std::filesystem::path into;  // where the wheel is left (a directory on the cache's filesystem)
  // Called with the item's toolchain before anything is fetched or built: an error stops the
  // rebuild (the host differs from the one the wheel records).
  std::function<Expected<void>(const toolchain::Toolchain&)> check_toolchain;
};

struct ItemResult {
  std::string package, version, target, key, backend;
  std::filesystem::path wheel;
  std::string sha256;
  bool cache_hit = false;
  bool remote_hit = false;       // the wheel came from the remote cache (validated, then committed)
  std::vector<std::string> why;  // with --explain
  // A build's reasons its wheel's bytes may differ from the same build's elsewhere (its root at
  // the cache's own path, nvcc outside a PID namespace), kept in its entry for later hits; empty
  // for a reproducible build and for a remote hit (the remote's word is not taken).
  std::vector<std::string> caveats;
  // The entry's signed attestation (this run's build, or an earlier build's on this host), or "".
  std::filesystem::path attestation;
  double seconds = 0;
};

// One job of the pool (or one of kiln's steps: a package's preparation, its wheel), as the trace
// and --json show it: the runner's timing (its start from the run's), and whose it was.
struct JobRecord {
  compile::JobStats::Timing timing;
  std::string package, version, target;
  std::string unit, arch;  // compile::Job's
};

// The run against its floor: the jobs' CPU time over the slots, or the longest job, whichever is
// longer, is as fast as any schedule of these jobs could be.
struct Floor {
  double wall_seconds = 0;  // the whole run
  double cpu_seconds = 0;   // the compile jobs' (user + system)
  double longest_job_seconds = 0;
  int slots = 1;
  double floor_seconds = 0;  // max(longest, cpu / slots)
};

struct Failure {
  ItemResult item;  // package, version, target, key and backend of the item that failed
  Error error;
};

struct Result {
  std::vector<ItemResult> items;  // those taken or built, in the plan's order
  std::size_t downloads = 0;      // network downloads made
  std::size_t compile_jobs = 0;   // compiler and linker processes run
  std::size_t objects_reused = 0;
  std::vector<JobRecord> jobs;     // in the order they ended
  cache::Store::LocalStats local;  // the local object cache's hits and misses
  Floor floor;
  // The items that failed, in the plan's order (with fail_fast, those stopped too).
  std::vector<Failure> failures;
  // The run's error: the first failure's, or what stopped the whole run (an interrupt).
  std::optional<Error> error;
};

// The items, each a hit or a build; a failing item leaves the others' wheels (unless fail_fast),
// and the run's `error` set. An error before any item (the cache or the index cannot be opened) is
// the Expected's.
Expected<Result> run(const resolve::Plan& plan, const Options& options);

// The plan's one item built as `run` builds a miss, but with nothing taken from any cache (no
// wheel, no object, local or remote) and nothing committed: the checked wheel is left in
// `fresh.into`, and its path returned. `store` is the run's one Store (options.cache's): its
// downloads, toolkits and sysroots are used, its build roots and staging.
Expected<std::filesystem::path> build_fresh(cache::Store& store, const resolve::Plan& plan,
                                            const Options& options, const Fresh& fresh);

}  // namespace kiln::pipeline
