// kiln rebuild WHEEL|URL [--check] [--force] [--source DIR] [--output DIR] [--jobs N] [--offline]
//              [--index-url URL]
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/build_commit.h"
#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/strings.h"
#include "core/terminal.h"
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

struct Args {
  std::string wheel, source, output, index_url;
  bool check = false, force = false, offline = false;
  int jobs = 0;
  const CLI::Option* jobs_option = nullptr;
};

// The wheel to check: a file, or an http(s) URL downloaded into the cache's downloads.
fs::path wheel_file(Context& ctx, const Args& args, cache::Store& store) {
  if (!args.wheel.starts_with("http://") && !args.wheel.starts_with("https://"))
    return absolute_path(args.wheel);
  auto fetching = pipeline::Fetching::create(store, ctx.offline(args.offline),
                                             ctx.index_url(args.index_url))
                      .value();
  std::string name = args.wheel.substr(args.wheel.rfind('/') + 1);
  name = name.substr(0, name.find_first_of("?#"));
  if (!name.ends_with(".whl") || name.find('/') != std::string::npos || name.size() > 255)
    raise(Error::bad_input(cat(terminal_field(args.wheel, 300), " does not name a .whl file")));
  auto got = fetching->context().downloader.fetch_unpinned(args.wheel, name, std::nullopt).value();
  return got.file.path;
}

wheel::Provenance provenance_of(const fs::path& wheel) {
  auto text = wheel::read_wheel_file(wheel, [](std::string_view path) {
                return path.ends_with(".dist-info/kiln.json") && path.find('/') == path.rfind('/');
              }).value();
  if (!text)
    raise(Error::bad_input(cat(wheel.filename().string(), " has no kiln.json: not a kiln wheel")));
  return wheel::parse_provenance(*text).value();
}

// What nobody else can fetch: refused without --force, named either way.
void check_unverifiable(const rebuild::Recipe& recipe, bool force) {
  if (recipe.unverifiable.empty()) return;
  std::string list = join(recipe.unverifiable, "; ");
  if (!force)
    raise(Error::bad_input(cat("this wheel has inputs a rebuild cannot verify: ", list,
                               " (--force rebuilds it with this machine's)")));
  log::warn(cat("not verifiable, taken from this machine: ", list));
}

// The plan of the recipe: its one item, with the recorded shard counts and the wheel's key.
resolve::Plan recipe_plan(const rebuild::Recipe& recipe, const manifest::Repository& repo,
                          const wheel::Provenance& p, int slots) {
  manifest::Target target =
      recipe.target.empty()
          ? manifest::parse_target(manifest::kEmbeddedDefaultTarget, "default", "default").value()
          : repo.target(recipe.target).value();
  resolve::Plan plan = resolve::make_plan(repo, {recipe.requirement}, {target}, slots).value();
  if (plan.items.size() != 1) raise(Error::failed("the wheel's recipe plans no single build"));
  resolve::use_shards(plan.items[0], recipe.shards).value();
  if (plan.items[0].key != p.build_key)
    raise(Error::failed(cat("the wheel's recipe gives build key ", plan.items[0].key.substr(0, 16),
                            ", not its recorded ", p.build_key.substr(0, 16), " (recipe ", p.recipe,
                            "; this kiln's is ", resolve::kRecipeVersion,
                            "): its inputs were edited, or this kiln computes keys another way")));
  return plan;
}

// Refuses a host whose toolchain differs from the wheel's builder's, naming each input.
std::function<Expected<void>(const toolchain::Toolchain&)> host_check(const wheel::Provenance& p,
                                                                      bool force) {
  return [&p, force](const toolchain::Toolchain& tc) -> Expected<void> {
    std::vector<std::string> lines;
    for (const auto& d : rebuild::host_differences(p, tc)) lines.push_back(rebuild::describe(d));
    if (lines.empty()) return {};
    if (!force)
      return Error::failed(cat("this host differs from the one that built the wheel: ",
                               join(lines, "; "), " (--force rebuilds here anyway)"));
    log::warn(cat("this host differs from the wheel's builder: ", join(lines, "; ")));
    return {};
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
    log::info(cat("rebuilt ", wheel.filename().string(), ": the same bytes (sha256 ", c.sha256, ")"));
    return;
  }
  log::info(cat("rebuilt ", wheel.filename().string(), ": different bytes (sha256 ", c.sha256,
                ", rebuilt ", c.rebuilt_sha256, ")"));
  for (const auto& line : lines) log::info(cat("  ", terminal_text(line, false)));
}

int run_rebuild(Context& ctx, const Args& args) {
  cache::Store store(ctx.cache_path());
  fs::path wheel = wheel_file(ctx, args, store);
  wheel::Provenance p = provenance_of(wheel);
  cache::Staging work = store.staging("rebuild-").value();
  fs::path source = args.source.empty() ? fs::path() : absolute_path(args.source);
  rebuild::Recipe recipe = rebuild::write_recipe(p, work.path() / "recipe", source).value();
  check_unverifiable(recipe, args.force);
  auto repo = manifest::Repository::load(recipe.manifests, recipe.patches, "the wheel's recipe");
  resolve::Plan plan = recipe_plan(recipe, repo.value(), p, ctx.jobs(args.jobs_option, args.jobs));
  if (p.rebuild->kiln_commit != build_commit())
    log::info(cat("the wheel was built by kiln ", p.kiln, " (commit ", p.rebuild->kiln_commit,
                  "); this is commit ", build_commit()));
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
      pipeline::build_fresh(plan, po, {into, host_check(p, args.force)}).value();
  rebuild::Comparison c = rebuild::compare_wheels(wheel, rebuilt).value();
  print(ctx, wheel, c);
  if (!args.output.empty()) {
    fs::path out = absolute_path(args.output);
    ensure_directory(out).value();
    fs::copy_file(rebuilt, out / rebuilt.filename(), fs::copy_options::overwrite_existing);
  }
  return args.check && !c.same ? 1 : 0;
}

}  // namespace

std::function<int()> configure_rebuild(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<Args>();
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
