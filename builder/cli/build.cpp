// kiln build [PACKAGES…] [--target T]… [--archs SPEC] [--backend B] [--jobs N] [--explain]
// [--offline]
//            [--keep-build-root]
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/context.h"
#include "cli/usage.h"
#include "core/strings.h"
#include "pipeline/pipeline.h"
#include "remote/remote.h"
#include "resolve/plan.h"

namespace kiln::cli {

namespace {

// The build's remote cache (remote/remote.h says where it comes from), or null.
std::shared_ptr<cache::SharedCache> shared_cache(const std::optional<std::string>& url,
                                                 bool readonly,
                                                 const std::filesystem::path& cache) {
  remote::Config config = remote::load_config(url, readonly, cache).value();
  if (config.url.empty()) return nullptr;
  auto backend = remote::open_remote(config).value();
  return std::make_shared<cache::SharedCache>(std::move(backend), config.readonly,
                                              config.lease_ttl);
}

nlohmann::json stores_json(const pipeline::Result& result, const cache::SharedCache* shared) {
  nlohmann::json stores = {
      {"local", {{"hits", result.local.hits}, {"misses", result.local.misses}}}};
  if (shared) {
    stores["remote"] = shared->stats().to_json();
    stores["remote"]["url"] = shared->describe();
    stores["remote"]["readonly"] = shared->readonly();
  }
  return stores;
}

}  // namespace

std::function<int()> configure_build(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> packages, targets;
    std::string archs, index_url, backend;
    int jobs = 0;
    bool explain = false, offline = false, keep_build_root = false, remote_readonly = false;
    std::optional<std::string> remote;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("packages", opts->packages, "NAME or NAME==VERSION (default: every package)");
  sub.add_option("-t,--target", opts->targets, "Target name or file (repeatable; default: default)")
      ->allow_extra_args(false);
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs, "Override the targets' archs, e.g. \"9.0;12.0+PTX\"");
  sub.add_option("--backend", opts->backend,
                 "Build with this backend instead of the manifests' (native, setuptools, pure)")
      ->check(CLI::IsMember({"native", "setuptools", "pure"}));
  sub.add_option("-j,--jobs", opts->jobs, "Parallel jobs (default: one per core)")
      ->check(non_negative_count());
  sub.add_flag("--explain", opts->explain, "Say why each package is built (which input changed)");
  sub.add_flag("--offline", opts->offline,
               "Never use the network; fail when something is not cached");
  sub.add_option("--index-url", opts->index_url,
                 "Package index for sources and torch (default: pip's)");
  sub.add_option("--remote-cache", opts->remote,
                 "Shared remote cache: http(s):// (WebDAV) or redis:// (default: "
                 "$KILN_REMOTE_CACHE, else kiln.toml beside the cache)");
  sub.add_flag("--remote-cache-readonly", opts->remote_readonly,
               "Take from the remote cache, never store into it");
  sub.add_flag("--keep-build-root", opts->keep_build_root,
               "Keep each package's build root (sources, objects, logs) instead of removing it");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    auto targets = ctx.targets(opts->targets, opts->archs);
    std::optional<manifest::Backend> backend;
    if (opts->backend == "native") backend = manifest::Backend::Native;
    if (opts->backend == "setuptools") backend = manifest::Backend::Setuptools;
    if (opts->backend == "pure") backend = manifest::Backend::Pure;
    resolve::Plan plan =
        resolve::make_plan(ctx.repository(), opts->packages, targets, opts->jobs, backend).value();
    pipeline::Options po;
    po.cache = ctx.cache_path();
    po.jobs = opts->jobs;
    po.explain = opts->explain;
    po.offline = opts->offline;
    po.index_url = opts->index_url;
    po.keep_build_root = opts->keep_build_root;
    po.shared = shared_cache(opts->remote, opts->remote_readonly, po.cache);
    pipeline::Result result = pipeline::run(plan, po).value();
    if (ctx.json) {
      nlohmann::json items = nlohmann::json::array();
      std::size_t hits = 0;
      for (const auto& i : result.items) {
        hits += i.cache_hit;
        nlohmann::json j = {{"package", i.package},
                            {"version", i.version},
                            {"target", i.target},
                            {"backend", i.backend},
                            {"key", i.key},
                            {"wheel", i.wheel.string()},
                            {"sha256", i.sha256},
                            {"cache_hit", i.cache_hit},
                            {"remote_hit", i.remote_hit},
                            {"seconds", i.seconds}};
        if (opts->explain) j["why"] = i.why;
        items.push_back(std::move(j));
      }
      nlohmann::json timings = nlohmann::json::array();
      for (const auto& t : result.timings)
        timings.push_back({{"job", t.label},
                           {"seconds", t.seconds},
                           {"cpu_seconds", t.cpu_seconds},
                           {"max_rss_kib", t.max_rss_kib}});
      std::cout << nlohmann::json{{"items", items},
                                  {"fetches", result.downloads},
                                  {"compile_jobs", result.compile_jobs},
                                  {"objects_reused", result.objects_reused},
                                  {"cache_hits", hits},
                                  {"stores", stores_json(result, po.shared.get())},
                                  {"jobs", timings}}
                       .dump(2)
                << "\n";
      return 0;
    }
    for (const auto& i : result.items) {
      if (opts->explain) {
        std::cerr << "kiln: " << i.package << " " << i.version << " (" << i.target
                  << "): " << (i.cache_hit ? "cache hit" : "built") << "\n";
        for (const auto& w : i.why) std::cerr << "  " << w << "\n";
      }
      std::cout << i.wheel.string() << "\n";
    }
    return 0;
  };
}

}  // namespace kiln::cli
