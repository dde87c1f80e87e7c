// kiln build [PACKAGES…] [--target T]… [--archs SPEC] [--backend B] [--jobs N] [--explain]
//            [--offline] [--keep-build-root] [--remote-cache URL] [--remote-cache-readonly]
//            [--expect-key KEY] [--fail-fast] [--trace FILE]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <set>

#include "attest/key.h"
#include "cli/build_commit.h"
#include "cli/context.h"
#include "cli/remote_option.h"
#include "cli/usage.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/strings.h"
#include "manifest/backend.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "pipeline/pipeline.h"
#include "pipeline/trace.h"
#include "resolve/plan.h"
#include "wheel/metadata.h"
#include "wheel/reader.h"

namespace kiln::cli {

namespace {

nlohmann::json stores_json(const pipeline::Result& result, const cache::SharedCache* shared) {
  nlohmann::json stores = {
      {"local", {{"hits", result.local.hits}, {"misses", result.local.misses}}}};
  if (shared) stores["remote"] = remote_json(*shared);
  return stores;
}

// --expect-key: the plan must be that one item with that build key (a matrix job checks that its
// runner resolves what the machine that wrote the matrix resolved).
void check_expected_key(const resolve::Plan& plan, const std::string& expected) {
  if (plan.items.size() != 1)
    raise(Error::bad_input(cat("--expect-key needs a plan of one item; this one has ",
                               plan.items.size(), " (name one package and one target)")));
  const resolve::PlanItem& item = plan.items.front();
  if (item.key != expected)
    raise(Error::bad_input(
        cat("the build key of ", item.manifest->name, " ", item.manifest->version, " for ",
            item.target_name, " is ", item.key, " here, not ", expected,
            " as expected: this machine's toolchain or manifests differ from those of the "
            "machine that resolved the matrix (`kiln --json resolve` shows the key's inputs)")));
}

nlohmann::json item_json(const pipeline::ItemResult& i, bool explain) {
  nlohmann::json j = {
      {"package", i.package},
      {"version", i.version},
      {"target", i.target},
      {"backend", i.backend},
      {"key", i.key},
      {"wheel", i.wheel.string()},
      {"sha256", i.sha256},
      {"cache_hit", i.cache_hit},
      {"remote_hit", i.remote_hit},
      {"caveats", i.caveats},
      {"attestation",
       i.attestation.empty() ? nlohmann::json() : nlohmann::json(i.attestation.string())},
      {"seconds", i.seconds}};
  if (explain) j["why"] = i.why;
  return j;
}

nlohmann::json failure_json(const pipeline::Failure& f) {
  return {{"message", f.error.message},
          {"detail", f.error.detail},
          {"exit_code", exit_code(f.error.kind)},
          {"package", f.item.package},
          {"version", f.item.version},
          {"target", f.item.target},
          {"key", f.item.key}};
}

// The run's result as --json prints it; a failed run's too (the items built, each item that failed
// and why, the first failure as `error`), so a script reads what happened from stdout either way.
nlohmann::json result_json(const pipeline::Result& result, bool explain,
                           const cache::SharedCache* shared) {
  nlohmann::json items = nlohmann::json::array();
  std::size_t hits = 0;
  for (const auto& i : result.items) {
    hits += i.cache_hit;
    items.push_back(item_json(i, explain));
  }
  nlohmann::json timings = nlohmann::json::array();
  for (const auto& j : result.jobs) {
    if (j.timing.verdict != compile::JobStats::Verdict::Compiled) continue;
    timings.push_back({{"job", j.timing.label},
                       {"package", j.package},
                       {"seconds", j.timing.seconds},
                       {"cpu_seconds", j.timing.cpu_seconds},
                       {"max_rss_kib", j.timing.max_rss_kib}});
  }
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& f : result.failures) failed.push_back(failure_json(f));
  const pipeline::Floor& fl = result.floor;
  nlohmann::json out = {{"ok", !result.error},
                        {"items", items},
                        {"failed", failed},
                        {"fetches", result.downloads},
                        {"compile_jobs", result.compile_jobs},
                        {"objects_reused", result.objects_reused},
                        {"cache_hits", hits},
                        {"stores", stores_json(result, shared)},
                        {"build",
                         {{"wall_seconds", fl.wall_seconds},
                          {"cpu_seconds", fl.cpu_seconds},
                          {"longest_job_seconds", fl.longest_job_seconds},
                          {"slots", fl.slots},
                          {"floor_seconds", fl.floor_seconds}}},
                        {"jobs", timings}};
  if (!result.failures.empty()) {
    out["error"] = failure_json(result.failures.front());
  } else if (result.error) {
    out["error"] = {{"message", result.error->message},
                    {"detail", result.error->detail},
                    {"exit_code", exit_code(result.error->kind)}};
  }
  return out;
}

// Each failure but the first as an error line (the first is the command's own error, last).
void report_failures(const pipeline::Result& result) {
  for (std::size_t i = 1; i < result.failures.size(); ++i) {
    const auto& f = result.failures[i];
    log::error(
        cat(f.item.package, " ", f.item.version, " (", f.item.target, "): ", f.error.message));
  }
  if (result.failures.size() > 1)
    log::error(cat(result.failures.size(), " of ", result.failures.size() + result.items.size(),
                   " items failed; the first:"));
}

void print_result(const pipeline::Result& result, bool explain) {
  for (const auto& i : result.items) {
    if (explain) {
      std::cerr << "kiln: " << i.package << " " << i.version << " (" << i.target
                << "): " << (i.cache_hit ? "cache hit" : "built") << "\n";
      for (const auto& w : i.why) std::cerr << "  " << w << "\n";
    }
    std::cout << i.wheel.string() << "\n";
  }
}

// pip and uv install a package without an extra it does not provide, with a warning: kiln builds
// the same wheel either way (an extra selects requirements, not bytes) and warns as they do.
void warn_of_missing_extras(const std::vector<std::string>& packages,
                            const pipeline::Result& result) {
  std::set<std::string> said;
  for (const auto& spec : packages) {
    auto requirement = packaging::parse_requirement(spec);
    if (!requirement || requirement->extras.empty()) continue;
    for (const auto& item : result.items) {
      if (packaging::normalize_name(item.package) != requirement->normalized) continue;
      auto metadata = wheel::read_wheel_file(item.wheel, [](std::string_view path) {
        return path.ends_with(".dist-info/METADATA") && path.find('/') == path.rfind('/');
      });
      if (!metadata || !*metadata) continue;
      std::vector<std::string> provided;
      for (const auto& e : wheel::parse_metadata(**metadata).all("Provides-Extra"))
        provided.push_back(packaging::normalize_name(e));
      for (const auto& extra : requirement->extras) {
        if (std::find(provided.begin(), provided.end(), extra) != provided.end() ||
            !said.insert(cat(requirement->normalized, "[", extra, "]")).second)
          continue;
        log::warn(cat(item.package, " ", item.version, " does not provide the extra '", extra,
                      "' (",
                      provided.empty() ? "it has none" : cat("it has ", join(provided, ", ")),
                      "); pip and uv install it without"));
      }
    }
  }
}

}  // namespace

std::function<int()> configure_build(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> packages, targets;
    std::string archs, index_url, backend;
    int jobs = 0;
    bool explain = false, offline = false, keep_build_root = false;
    std::string expect_key, sandbox, signing_key, trace;
    bool fail_fast = false;
    RemoteOption remote;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("packages", opts->packages,
                 "A requirement as pip reads it: NAME, NAME==VERSION, 'NAME>=1.6,<1.7', "
                 "'NAME[extra]', 'NAME (>=1.6)', 'NAME; python_version>=\"3.12\"' (default: every "
                 "package)")
      ->type_name(kPackageValue);
  sub.add_option("-t,--target", opts->targets, "Target name or file (repeatable; default: default)")
      ->allow_extra_args(false)
      ->type_name(kTargetValue);
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs, "Override the targets' archs, e.g. \"9.0;12.0+PTX\"")
          ->type_name(kArchsValue);
  std::vector<std::string> backends;
  for (const auto& b : manifest::backends()) backends.emplace_back(b.name);
  sub.add_option(
         "--backend", opts->backend,
         cat("Build with this backend instead of the manifests' (", join(backends, ", "), ")"))
      ->check(CLI::IsMember(backends));
  CLI::Option* jobs = sub.add_option("-j,--jobs", opts->jobs,
                                     "Parallel jobs (default: $KILN_JOBS, the configuration's, "
                                     "else one per core)")
                          ->check(non_negative_count());
  sub.add_flag("--explain", opts->explain, "Say why each package is built (which input changed)");
  sub.add_flag("--offline", opts->offline,
               "Never use the network; fail when something is not cached");
  sub.add_option("--index-url", opts->index_url,
                 "Package index for sources and torch (default: pip's)");
  add_remote_options(sub, opts->remote);
  sub.add_option("--expect-key", opts->expect_key,
                 "Fail unless the plan is one item with this build key (a matrix job's check)");
  sub.add_flag("--keep-build-root", opts->keep_build_root,
               "Keep each package's build root (sources, objects, logs) instead of removing it");
  sub.add_option("--sandbox", opts->sandbox,
                 "Where a package's code runs: auto (sandboxed where namespaces may be made), "
                 "required, off (default: $KILN_SANDBOX, the configuration's, else auto)")
      ->check(CLI::IsMember({"auto", "required", "off"}))
      ->type_name("MODE");
  sub.add_flag("--fail-fast", opts->fail_fast,
               "Stop every job at the first package that fails (default: the others are still "
               "built)");
  sub.add_option("--trace", opts->trace,
                 "Write the build's jobs to FILE as Chrome trace-event JSON (Perfetto, "
                 "chrome://tracing; docs/pool.md)")
      ->type_name("FILE");
  sub.add_option("--signing-key", opts->signing_key,
                 "Sign each wheel built here with this Ed25519 key (`kiln key generate`; default: "
                 "$KILN_SIGNING_KEY, the configuration's signing-key, else none)")
      ->type_name("FILE");
  return [&ctx, opts, archs_option, jobs] {
    require_archs_value(archs_option, opts->archs);
    // Read before anything is built: a key that cannot sign fails now, not after the compiles.
    std::string key_file = opts->signing_key.empty() ? ctx.defaults.signing_key : opts->signing_key;
    std::shared_ptr<const attest::SigningKey> signing_key;
    if (!key_file.empty())
      signing_key = std::make_shared<const attest::SigningKey>(
          attest::SigningKey::load(absolute_path(key_file)).value());
    auto targets = ctx.targets(opts->targets, opts->archs);
    const manifest::BackendSpec* backend = manifest::backend_named(opts->backend);
    opts->jobs = ctx.jobs(jobs, opts->jobs);
    resolve::Plan plan =
        resolve::make_plan(ctx.repository(), opts->packages, targets, opts->jobs, backend).value();
    for (const auto& line : plan.ignored) log::info(line);
    if (plan.items.empty() && !plan.ignored.empty())
      log::info("nothing to build: no package's marker is true for the targets");
    if (!opts->expect_key.empty()) check_expected_key(plan, opts->expect_key);
    pipeline::Options po;
    po.cache = ctx.cache_path();
    po.jobs = opts->jobs;
    po.explain = opts->explain;
    po.offline = ctx.offline(opts->offline);
    po.index_url = ctx.index_url(opts->index_url);
    po.keep_build_root = opts->keep_build_root;
    po.sandbox = *parse_sandbox_mode(opts->sandbox.empty() ? ctx.defaults.sandbox : opts->sandbox);
    po.shared = open_shared_cache(opts->remote, po.cache);
    po.kiln_commit = std::string(build_commit());
    po.signing_key = std::move(signing_key);
    po.fail_fast = opts->fail_fast;
    pipeline::Result result = pipeline::run(plan, po).value();
    if (ctx.json)
      std::cout << result_json(result, opts->explain, po.shared.get())
                       .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      print_result(result, opts->explain);
    if (!opts->trace.empty())
      write_file_atomic(absolute_path(opts->trace), pipeline::trace_json(result).dump() + "\n")
          .value();
    report_failures(result);
    if (result.error) raise(*result.error);
    warn_of_missing_extras(opts->packages, result);
    return 0;
  };
}

}  // namespace kiln::cli
