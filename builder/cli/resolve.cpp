// kiln resolve [PACKAGES…] [--target T]… [--archs SPEC] [--all-versions] [--github-matrix]
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

#include "cli/context.h"
#include "cli/table.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "manifest/backend.h"
#include "resolve/plan.h"
#include "resolve/versions.h"

namespace kiln::cli {

namespace {

struct ResolveOptions {
  std::vector<std::string> packages, targets;
  std::string archs;
  bool all_versions = false, github_matrix = false;
};

// GitHub Actions runs at most this many jobs from one matrix.
constexpr std::size_t kGithubMatrixLimit = 256;

int print_plan(const resolve::Plan& plan, bool json) {
  if (json) {
    nlohmann::json out = {{"targets", nlohmann::json::array()}, {"items", nlohmann::json::array()}};
    for (const auto& rt : plan.targets)
      out["targets"].push_back({{"name", rt.target.name},
                                {"archs", rt.target.archs.canonical()},
                                {"python_tag", rt.python_tag},
                                {"toolchain", rt.toolchain}});
    for (const auto& item : plan.items)
      out["items"].push_back({{"package", item.manifest->name},
                              {"version", item.manifest->version},
                              {"backend", std::string(item.manifest->backend->name)},
                              {"target", item.target_name},
                              {"manifest", item.manifest->display_path},
                              {"key", item.key},
                              {"inputs", item.inputs}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  Table table({"PACKAGE", "VERSION", "BACKEND", "TARGET", "ARCHS", "BUILD KEY"});
  for (const auto& item : plan.items) {
    std::string archs = "-";
    if (item.manifest->backend->compiles)
      for (const auto& rt : plan.targets)
        if (rt.target.name == item.target_name) archs = rt.target.archs.canonical();
    table.add({item.manifest->name, item.manifest->version,
               std::string(item.manifest->backend->name), item.target_name, archs, item.key});
  }
  std::cout << table.render();
  return 0;
}

// --github-matrix: one job per plan item as a `strategy.matrix` value ({"include": […]}) on one
// line, for $GITHUB_OUTPUT. Each job builds its item with `kiln build PACKAGE --target TARGET
// [--archs ARCHS] --expect-key KEY` (docs/examples/github-matrix.yml); `target` is the --target
// value as given here (a name or a file), so the job resolves the same target.
int print_github_matrix(const resolve::Plan& plan, const std::vector<manifest::Target>& targets,
                        const std::vector<std::string>& target_args, const std::string& archs) {
  if (plan.items.size() > kGithubMatrixLimit)
    raise(Error::bad_input(cat("the plan has ", plan.items.size(),
                               " items; a GitHub Actions "
                               "matrix runs at most ",
                               kGithubMatrixLimit,
                               " jobs: split the packages or targets over several matrices")));
  std::map<std::string, std::string> arg_of;  // target name -> its --target value
  for (std::size_t i = 0; i < targets.size(); ++i)
    arg_of[targets[i].name] = target_args.empty() ? "default" : target_args[i];
  nlohmann::json include = nlohmann::json::array();
  for (const auto& item : plan.items) {
    const manifest::Manifest& m = *item.manifest;
    include.push_back({{"name", cat(m.name, " ", m.version, " (", item.target_name, ")")},
                       {"package", cat(m.name, "==", m.version)},
                       {"target", arg_of.at(item.target_name)},
                       {"archs", archs},
                       {"backend", std::string(m.backend->name)},
                       {"key", item.key}});
  }
  std::cout << nlohmann::json{{"include", include}}.dump() << "\n";
  return 0;
}

}  // namespace

std::function<int()> configure_resolve(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<ResolveOptions>();
  sub.add_option("packages", opts->packages,
                 "NAME, NAME==VERSION or NAME with specifiers, e.g. 'NAME>=1.6,<1.7' (default: "
                 "every package)")
      ->type_name(kPackageValue);
  sub.add_option("-t,--target", opts->targets,
                 "Target name or file (repeatable; default: default, or with --all-versions every "
                 "target of the manifests directory)")
      ->allow_extra_args(false)
      ->type_name(kTargetValue);
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs, "Override the targets' archs, e.g. \"9.0;12.0+PTX\"")
          ->type_name(kArchsValue);
  sub.add_flag("--all-versions", opts->all_versions,
               "Every manifest version of the packages (not only the newest) for every target");
  sub.add_flag("--github-matrix", opts->github_matrix,
               "Print the plan as a GitHub Actions matrix: {\"include\": [one job per item]}");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    std::vector<std::string> packages = opts->packages, target_names = opts->targets;
    bool every_target = opts->all_versions && target_names.empty();
    if (opts->all_versions) {
      packages = resolve::every_version(ctx.repository(), opts->packages).value();
      if (packages.empty()) raise(Error::bad_input("no package manifests to resolve"));
      if (every_target) target_names = resolve::loadable_targets(ctx.repository());
    }
    auto targets = ctx.targets(target_names, opts->archs);
    // Every target: one that cannot be used here (an environment without torch) is named on
    // stderr and left out; a target named with --target is needed.
    resolve::Plan plan =
        resolve::make_plan(ctx.repository(), packages, targets, 0, nullptr, every_target).value();
    for (const auto& skipped : plan.skipped_targets) log::warn(cat("left out ", skipped.message));
    for (const auto& line : plan.ignored) log::info(line);
    if (opts->github_matrix) return print_github_matrix(plan, targets, target_names, opts->archs);
    return print_plan(plan, ctx.json);
  };
}

}  // namespace kiln::cli
