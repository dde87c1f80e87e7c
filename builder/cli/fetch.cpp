// kiln fetch PKG… [--target T]… [--offline] [--index-url URL]: download and verify sources (with
// --target, also the files each target pins: torch, toolkit wheels, the setuptools environment's);
// print their paths.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cache/store.h"
#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "pipeline/pins.h"
#include "pipeline/sources.h"
#include "resolve/plan.h"

namespace kiln::cli {

namespace {

// --target: what a later --offline build of the packages for each target fetches besides their
// sources, from the same list the build uses (pipeline::pinned_files).
void fetch_target_pins(Context& ctx, const std::vector<std::string>& packages,
                       const std::vector<std::string>& target_names, pipeline::Fetching& fetching,
                       nlohmann::json& out, std::size_t& cached) {
  auto targets = ctx.targets(target_names, "");
  resolve::Plan plan = resolve::make_plan(ctx.repository(), packages, targets).value();
  for (const auto& rt : plan.targets) {
    const std::vector<pipeline::PinnedFile> files = pipeline::pinned_files(plan, rt).value();
    for (const auto& file : files) {
      fetch::Fetched got = pipeline::fetch_pinned(fetching, file).value();
      out.push_back({{"target", rt.target.name},
                     {"project", file.project},
                     {"file", file.file},
                     {"path", got.path.string()},
                     {"sha256", file.sha256},
                     {"downloaded", got.downloaded}});
      cached += !got.downloaded;
      if (!ctx.json) std::cout << got.path.string() << "\n";
    }
  }
}

}  // namespace

std::function<int()> configure_fetch(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> packages, targets;
    bool offline = false;
    std::string index_url;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("packages", opts->packages,
                 "NAME, NAME==VERSION or NAME with specifiers, e.g. 'NAME~=1.6.0'")
      ->required();
  sub.add_option("-t,--target", opts->targets,
                 "Also fetch what a build for this target needs besides sources: its torch wheel, "
                 "toolkit wheels, the setuptools environment (repeatable)")
      ->allow_extra_args(false);
  sub.add_flag("--offline", opts->offline, "Use the download cache only");
  sub.add_option("--index-url", opts->index_url, "Package index (default: pip's configuration)");
  return [&ctx, opts] {
    auto fetching =
        pipeline::Fetching::create(ctx.cache_path(), opts->offline, opts->index_url).value();
    nlohmann::json out = nlohmann::json::array();
    std::size_t cached = 0;
    const cache::Store& store = fetching->store();
    for (const auto& spec : opts->packages) {
      const manifest::Manifest* m = ctx.repository().select(spec).value();
      // A git source is checked out into a scratch directory that is removed afterwards; the
      // mirror in the cache is what stays.
      cache::Staging scratch = store.staging("fetch-").value();
      fetch::Fetched got =
          pipeline::fetch_package(*m, *fetching, scratch.path() / "checkout").value();
      std::string where = got.is_directory && m->source.kind == manifest::Source::Kind::Git
                              ? store.git_mirror(m->source.url).string()
                              : got.path.string();
      out.push_back({{"package", m->name},
                     {"version", m->version},
                     {"path", where},
                     {"sha256", got.sha256},
                     {"downloaded", got.downloaded}});
      cached += !got.downloaded;
      if (!ctx.json) std::cout << where << "\n";
    }
    nlohmann::json pinned = nlohmann::json::array();
    if (!opts->targets.empty())
      fetch_target_pins(ctx, opts->packages, opts->targets, *fetching, pinned, cached);
    if (ctx.json)
      std::cout << nlohmann::json{{"items", out},
                                  {"pinned", pinned},
                                  {"fetches", fetching->downloads()}}
                       .dump(2)
                << "\n";
    else
      log::info(
          cat(out.size() + pinned.size() - cached, " downloaded, ", cached, " from the cache"));
    return 0;
  };
}

}  // namespace kiln::cli
