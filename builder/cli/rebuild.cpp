// kiln rebuild WHEEL|URL [--check] [--force] [--source DIR] [--output DIR] [--jobs N] [--offline]
//              [--index-url URL]
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/build_commit.h"
#include "cli/context.h"
#include "cli/wheel_source.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "fetch/url.h"
#include "pipeline/pipeline.h"
#include "pipeline/sources.h"
#include "rebuild/compare.h"
#include "rebuild/host.h"
#include "rebuild/recipe.h"
#include "resolve/plan.h"
#include "wheel/reader.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

struct RebuildArgs {
  std::string wheel, source, output, index_url;
  bool check = false, force = false, offline = false;
  int jobs = 0;
  const CLI::Option* jobs_option = nullptr;
};

wheel::Provenance provenance_of(const fs::path& wheel) {
  auto text = wheel::read_kiln_json(wheel).value();
  if (!text)
    raise(Error::bad_input(cat(wheel.filename().string(), " has no kiln.json: not a kiln wheel")));
  return wheel::parse_provenance(*text).value();
}

// Refused without --force, said as a warning with it: `what` names the kind of problem.
Expected<void> unless_forced(const std::string& what, const std::vector<std::string>& lines,
                             bool force) {
  if (lines.empty()) return {};
  std::string list = join(lines, "; ");
  if (!force) return Error::bad_input(cat(what, ": ", list, " (--force rebuilds it anyway)"));
  log::warn(cat(what, ": ", list));
  return {};
}

// The plan of the recipe: its one item, with the recorded shard counts.
resolve::Plan recipe_plan(const rebuild::Recipe& recipe, const manifest::Repository& repo,
                          int slots) {
  manifest::Target target =
      recipe.target.empty()
          ? manifest::parse_target(manifest::kEmbeddedDefaultTarget, "default", "default").value()
          : repo.target(recipe.target).value();
  resolve::Plan plan = resolve::make_plan(repo, {recipe.requirement}, {target}, slots).value();
  if (plan.items.size() != 1) raise(Error::failed("the wheel's recipe plans no single build"));
  resolve::use_shards(plan.items[0], recipe.shards).value();
  return plan;
}

// What this rebuild cannot verify before it builds: the inputs nobody but the builder can fetch,
// and each input of the wheel's key this host gives another value (its toolchain, or a recipe
// this kiln reads another way).
void check_inputs(const rebuild::Recipe& recipe, const resolve::PlanItem& item,
                  const wheel::Provenance& p, bool force) {
  std::vector<std::string> lines = recipe.unverifiable;
  if (item.key != p.build_key) {
    for (const auto& d : rebuild::input_differences(p.inputs, item.inputs))
      lines.push_back(rebuild::describe(d));
    if (p.recipe != resolve::kRecipeVersion)
      lines.push_back(cat("the wheel's key recipe is ", p.recipe, ", this kiln's ",
                          resolve::kRecipeVersion, " (rebuild it with kiln commit ",
                          p.rebuild->kiln_commit, ")"));
    if (lines.size() == recipe.unverifiable.size())
      lines.push_back(cat("the wheel's build key ", p.build_key.substr(0, 16),
                          "… is not the sha256 of its inputs"));
  }
  unless_forced("this rebuild cannot verify the wheel", lines, force).value();
}

// After the toolchain is laid out: the host facts outside the key (linker, C library, CUDA
// headers), refused when they differ unless --force.
std::function<Expected<void>(const toolchain::Toolchain&)> host_check(const wheel::Provenance& p,
                                                                      bool force) {
  return [&p, force](const toolchain::Toolchain& tc) -> Expected<void> {
    std::vector<std::string> lines;
    for (const auto& d : rebuild::host_differences(p, tc)) lines.push_back(rebuild::describe(d));
    return unless_forced("this host differs from the one that built the wheel", lines, force);
  };
}

void print(Context& ctx, const fs::path& wheel, const rebuild::Comparison& c) {
  std::vector<std::string> lines = rebuild::summary(c);
  if (ctx.json) {
    std::cout << nlohmann::json{{"wheel", wheel.string()},
                                {"sha256", c.sha256},
                                {"rebuilt_sha256", c.rebuilt_sha256},
                                {"same", c.same},
                                {"differences", lines}}
                     .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return;
  }
  if (c.same) {
    log::info(
        cat("rebuilt ", wheel.filename().string(), ": the same bytes (sha256 ", c.sha256, ")"));
    return;
  }
  log::info(cat("rebuilt ", wheel.filename().string(), ": different bytes (sha256 ", c.sha256,
                ", rebuilt ", c.rebuilt_sha256, ")"));
  for (const auto& line : lines) log::info(cat("  ", terminal_text(line, false)));
}

int run_rebuild(Context& ctx, const RebuildArgs& args) {
  cache::Store store(ctx.cache_path());
  fs::path wheel =
      wheel_file(args.wheel, store, ctx.offline(args.offline), ctx.index_url(args.index_url));
  wheel::Provenance p = provenance_of(wheel);
  cache::Staging work = store.staging("rebuild-").value();
  fs::path source = args.source.empty() ? fs::path() : absolute_path(args.source);
  rebuild::Recipe recipe = rebuild::write_recipe(p, work.path() / "recipe", source).value();
  auto repo = manifest::Repository::load(recipe.manifests, recipe.patches, "the wheel's recipe");
  resolve::Plan plan = recipe_plan(recipe, repo.value(), ctx.jobs(args.jobs_option, args.jobs));
  check_inputs(recipe, plan.items[0], p, args.force);
  if (p.rebuild->kiln_commit != build_commit())
    log::info(cat("the wheel was built by kiln ", terminal_field(p.kiln, 100), " (commit ",
                  terminal_field(p.rebuild->kiln_commit, 100), "); this is commit ",
                  build_commit()));
  pipeline::Options po;
  po.cache = ctx.cache_path();
  po.jobs = ctx.jobs(args.jobs_option, args.jobs);
  po.offline = ctx.offline(args.offline);
  po.index_url = ctx.index_url(args.index_url);
  po.sandbox = *parse_sandbox_mode(ctx.defaults.sandbox);
  po.kiln_commit = p.rebuild->kiln_commit;
  po.kiln_version = p.kiln;
  fs::path into = work.path() / "out";
  ensure_directory(into).value();
  fs::path rebuilt =
      pipeline::build_fresh(store, plan, po, {into, host_check(p, args.force)}).value();
  rebuild::Comparison c = rebuild::compare_wheels(wheel, rebuilt).value();
  print(ctx, wheel, c);
  if (!args.output.empty()) {
    fs::path out = absolute_path(args.output);
    ensure_directory(out).value();
    std::error_code ec;
    fs::copy_file(rebuilt, out / rebuilt.filename(), fs::copy_options::overwrite_existing, ec);
    if (ec)
      raise(Error::failed(
          cat("cannot copy the rebuilt wheel into ", out.string(), ": ", ec.message())));
  }
  return args.check && !c.same ? 1 : 0;
}

}  // namespace

std::function<int()> configure_rebuild(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<RebuildArgs>();
  sub.footer(
      "Rebuilds a wheel kiln built from what its kiln.json records alone (the manifest, patches, "
      "target and shard counts), in a fresh build root with nothing from the wheel or object "
      "cache, and compares the bytes. Inputs nobody but the builder can fetch (a local tree, an "
      "environment's torch, a system CUDA toolkit) and a host whose compilers, linker, glibc, CUDA "
      "headers or Python differ from the recorded ones are refused without --force. "
      "docs/verify.md says what a match proves.");
  sub.add_option("wheel", opts->wheel, "The wheel: a file, or an http(s) URL")->required();
  sub.add_flag("--check", opts->check, "Exit 1 unless the rebuild has the same bytes");
  sub.add_flag("--force", opts->force,
               "Rebuild despite unverifiable inputs or a host that differs (said as warnings)");
  sub.add_option("--source", opts->source, "The tree of a local source")->type_name("DIR");
  sub.add_option("--output", opts->output, "Copy the rebuilt wheel into DIR")->type_name("DIR");
  opts->jobs_option = sub.add_option("-j,--jobs", opts->jobs, "Parallel jobs (0: one per core)");
  sub.add_flag("--offline", opts->offline, "Never touch the network");
  sub.add_option("--index-url", opts->index_url, "The package index for PyPI sources and torch")
      ->type_name("URL");
  return [&ctx, opts] { return run_rebuild(ctx, *opts); };
}

}  // namespace kiln::cli
