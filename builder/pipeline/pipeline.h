// Runs a plan: for each (package, target), a cache hit, or fetch -> unpack -> patch -> backend ->
// wheel -> check -> atomic commit, under the key's lock.
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

struct Result {
  std::vector<ItemResult> items;
  std::size_t downloads = 0;     // network downloads made
  std::size_t compile_jobs = 0;  // compiler and linker processes run
  std::size_t objects_reused = 0;
  std::vector<compile::JobStats::Timing> timings;
  cache::Store::LocalStats local;  // the local object cache's hits and misses
  // Set when an item failed: its error and which item (the run stops there; `items` holds those
  // done before it).
  std::optional<Error> error;
  std::optional<ItemResult> failed;  // package, version, target and key of the item that failed
};

// The items in order, each a hit or a build; the first failure ends the run with `error` set. An
// error before any item (the cache or the index cannot be opened) is the Expected's.
Expected<Result> run(const resolve::Plan& plan, const Options& options);

// The plan's one item built as `run` builds a miss, but with nothing taken from any cache (no
// wheel, no object, local or remote) and nothing committed: the checked wheel is left in
// `fresh.into`, and its path returned. `store` is the run's one Store (options.cache's): its
// downloads, toolkits and sysroots are used, its build roots and staging.
Expected<std::filesystem::path> build_fresh(cache::Store& store, const resolve::Plan& plan,
                                            const Options& options, const Fresh& fresh);

}  // namespace kiln::pipeline
