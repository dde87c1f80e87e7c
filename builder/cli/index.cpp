// kiln index export DIR [--copy] [--from CACHE]… | [PACKAGES…] [--target T]… [--archs SPEC]
//                   [--remote-cache URL]
// The index `kiln serve` serves, as static files: of this cache (default), of several caches
// merged (--from), or of exactly one plan's wheels, taken from this cache or the remote cache
// (packages, --target or --remote-cache given): what a matrix's builders made, assembled.
#include <CLI/CLI.hpp>

#include <iostream>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "cli/remote_option.h"
#include "cli/serve_routes.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "index/commands.h"
#include "index/export.h"
#include "index/scan.h"
#include "index/serve_policy.h"
#include "pipeline/pipeline.h"
#include "resolve/plan.h"

namespace kiln::cli {

namespace {

struct IndexOptions {
  std::string dir;
  bool copy = false;
  std::vector<std::string> from;  // --from CACHE…
  std::vector<std::string> packages, targets;
  std::string archs;
  RemoteOption remote;
  bool plan_mode() const {
    return !packages.empty() || !targets.empty() || !archs.empty() || remote.url || remote.readonly;
  }
};

// The entries of several caches, each key once (the first cache that has it).
index::IndexModel merged_model(const std::vector<std::string>& caches) {
  index::ScanMemo metadata;
  std::vector<index::WheelEntry> entries;
  std::vector<std::string> skipped;
  std::set<std::string> keys;
  for (const auto& c : caches) {
    std::error_code ec;
    if (!std::filesystem::is_directory(c, ec))
      raise(Error::bad_input(cat("--from ", c, ": no cache there")));
    index::ScanResult scan = index::scan_cache(c, metadata);
    for (auto& e : scan.entries)
      if (keys.insert(e.key).second) entries.push_back(std::move(e));
    for (auto& s : scan.skipped) skipped.push_back(cat(c, ": ", s));
  }
  index::IndexModel model = index::build_model(std::move(entries));
  model.skipped.insert(model.skipped.begin(), skipped.begin(), skipped.end());
  return model;
}

// The plan's wheels, each taken from this cache or the remote (validated and committed as a build
// takes them), never built; the model of exactly those.
index::IndexModel plan_model(Context& ctx, const IndexOptions& opts) {
  auto targets = ctx.targets(opts.targets, opts.archs);
  resolve::Plan plan = resolve::make_plan(ctx.repository(), opts.packages, targets).value();
  pipeline::Options po;
  po.cache = ctx.cache_path();
  po.build = false;
  po.shared = open_shared_cache(opts.remote, po.cache);
  pipeline::Result result = pipeline::run(plan, po).value();
  if (result.error) raise(*result.error);
  std::set<std::string> keys;
  std::size_t remote = 0;
  for (const auto& i : result.items) {
    keys.insert(i.key);
    remote += i.remote_hit;
  }
  if (po.shared)
    log::info(cat("took ", remote, " of ", keys.size(), " wheels from the remote cache"));
  index::ScanMemo metadata;
  index::ScanResult scan = index::scan_cache(po.cache, metadata);
  std::vector<index::WheelEntry> entries;
  for (auto& e : scan.entries)
    if (keys.count(e.key)) entries.push_back(std::move(e));
  return index::build_model(std::move(entries));
}

// A static index cannot redirect: what works with it, per target (docs/serve.md, "Static export").
void print_recipes(const index::IndexModel& model, const std::filesystem::path& dir, Context& ctx) {
  index::Routes routes;
  try {
    routes = serve_routes(ctx, std::nullopt);
  } catch (const KilnError& e) {
    log::warn(cat("no install commands: ", e.what()));
    return;
  }
  std::string url = "file://";
  for (const auto& part : dir.relative_path())
    url += cat("/", index::percent_encode(part.string()));
  for (const auto& [name, t] : model.targets) {
    std::string torch;
    if (auto it = routes.targets.find(name); it != routes.targets.end()) torch = it->second.url;
    index::ExportCommands c = index::export_commands(
        t, cat(url, "/", index::percent_encode(name), "/simple/"), torch, routes.fallback);
    auto uv = shell_command(c.uv), lock = shell_command(c.lock), pip = shell_command(c.pip);
    if (!uv || !lock || !pip) {
      log::warn(cat(name, ": no install commands: a word of them holds a control character"));
      continue;
    }
    // One command a line, each pasted as it stands (a shell ignores what follows '#').
    log::info(cat(name, ": ", *uv));
    log::info(cat(name, ": ", *lock, "  # for pip: requirements.in names the projects above"));
    log::info(cat(name, ": ", *pip));
  }
}

int export_model(const index::IndexModel& model, const IndexOptions& opts, Context& ctx) {
  for (const auto& s : model.skipped) log::warn(cat("not exported: ", s));
  index::ExportOptions eo;
  eo.copy = opts.copy;
  eo.own = index::own_names(ctx.repository_or_error());
  index::ExportResult r = index::export_index(model, opts.dir, eo).value();
  if (ctx.json) {
    std::cout << nlohmann::json{{"dir", absolute_path(opts.dir).string()},
                                {"targets", r.targets},
                                {"projects", r.projects},
                                {"files", r.files},
                                {"linked", r.linked},
                                {"copied", r.copied},
                                {"empty", r.empty}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << absolute_path(opts.dir).string() << "\n";
  log::info(cat("exported ", r.files, " wheels of ", r.projects, " projects in ", r.targets,
                " targets (", r.linked, " hard-linked, ", r.copied, " copied; ", r.empty,
                " empty pages for kiln's names without files there)"));
  print_recipes(model, absolute_path(opts.dir).lexically_normal(), ctx);
  return 0;
}

}  // namespace

std::function<int()> configure_index(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<IndexOptions>();
  sub.require_subcommand(1);
  CLI::App* exp = sub.add_subcommand(
      "export", "Write the index as static files (HTML, JSON, metadata, wheels)");
  exp->add_option("dir", opts->dir,
                  "Output directory (replaced atomically when it is an earlier export)")
      ->required();
  exp->add_flag("--copy", opts->copy,
                "Copy the wheels (default: hard links into the cache where possible)");
  CLI::Option* from = exp->add_option("--from", opts->from,
                                      "Merge these caches' wheels into one index (repeatable)");
  CLI::Option* packages =
      exp->add_option("packages", opts->packages,
                      "Export exactly these packages' wheels (NAME, NAME==VERSION or NAME with "
                      "specifiers) for "
                      "the targets, taken from this cache or the remote cache, never built")
          ->type_name(kPackageValue);
  CLI::Option* target =
      exp->add_option("-t,--target", opts->targets, "With packages: target name or file")
          ->allow_extra_args(false)
          ->type_name(kTargetValue);
  CLI::Option* archs = exp->add_option("--archs", opts->archs, "With packages: override archs")
                           ->type_name(kArchsValue);
  add_remote_options(*exp, opts->remote);
  for (CLI::Option* o : {packages, target, archs, exp->get_option("--remote-cache"),
                         exp->get_option("--remote-cache-readonly")})
    from->excludes(o);
  return [&ctx, opts, archs] {
    require_archs_value(archs, opts->archs);
    if (!opts->from.empty()) return export_model(merged_model(opts->from), *opts, ctx);
    if (opts->plan_mode()) return export_model(plan_model(ctx, *opts), *opts, ctx);
    index::CacheIndex cache_index(ctx.existing_cache());
    return export_model(*cache_index.current(), *opts, ctx);
  };
}

}  // namespace kiln::cli
