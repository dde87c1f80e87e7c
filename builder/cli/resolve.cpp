// kiln resolve [PACKAGES…] [--target T]… [--archs SPEC] [--all-versions] [--github-matrix]
#include <CLI/CLI.hpp>

#include <iostream>
#include <map>

#include "cli/context.h"
#include "cli/table.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "manifest/version.h"
#include "resolve/plan.h"

namespace kiln::cli {

namespace {

struct Options {
  std::vector<std::string> packages, targets;
  std::string archs;
  bool all_versions = false, github_matrix = false;
};

// GitHub Actions runs at most this many jobs from one matrix.
constexpr std::size_t kGithubMatrixLimit = 256;

// --all-versions: every manifest ("name==version") of the named packages (default: of every
// package); a manifest that failed to load is named on stderr and left out.
std::vector<std::string> every_version(const manifest::Repository& repo,
                                       const std::vector<std::string>& names) {
  std::vector<std::string> wanted;
  for (const auto& n : names) {
    std::string name = n.substr(0, n.find("=="));
    repo.select(name).value();  // an unknown package: its error (with the nearest name)
    wanted.push_back(manifest::normalize_name(name));
  }
  auto selected = [&](const std::string& normalized) {
    return wanted.empty() || std::find(wanted.begin(), wanted.end(), normalized) != wanted.end();
  };
  for (const auto& b : repo.broken())
    if (selected(b.package))
      log::warn(cat("left out ", b.package, " ", b.version, ": ", b.error.message));
  std::vector<std::string> out;
  for (const auto& m : repo.manifests())
    if (selected(m.normalized_name())) out.push_back(cat(m.name, "==", m.version));
  return out;
}

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
                              {"backend", manifest::backend_name(item.manifest->backend)},
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
    if (item.manifest->backend != manifest::Backend::Pure)
      for (const auto& rt : plan.targets)
        if (rt.target.name == item.target_name) archs = rt.target.archs.canonical();
    table.add({item.manifest->name, item.manifest->version,
               manifest::backend_name(item.manifest->backend), item.target_name, archs, item.key});
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
                       {"backend", manifest::backend_name(m.backend)},
                       {"key", item.key}});
  }
  std::cout << nlohmann::json{{"include", include}}.dump() << "\n";
  return 0;
}

}  // namespace

std::function<int()> configure_resolve(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<Options>();
  sub.add_option("packages", opts->packages, "NAME or NAME==VERSION (default: every package)");
  sub.add_option("-t,--target", opts->targets,
                 "Target name or file (repeatable; default: default, or with --all-versions every "
                 "target of the manifests directory)")
      ->allow_extra_args(false);
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs, "Override the targets' archs, e.g. \"9.0;12.0+PTX\"");
  sub.add_flag("--all-versions", opts->all_versions,
               "Every manifest version of the packages (not only the newest) for every target");
  sub.add_flag("--github-matrix", opts->github_matrix,
               "Print the plan as a GitHub Actions matrix: {\"include\": [one job per item]}");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    std::vector<std::string> packages = opts->packages, target_names = opts->targets;
    if (opts->all_versions) {
      packages = every_version(ctx.repository(), opts->packages);
      if (packages.empty()) raise(Error::bad_input("no package manifests to resolve"));
      if (target_names.empty()) target_names = ctx.repository().target_names();
    }
    auto targets = ctx.targets(target_names, opts->archs);
    resolve::Plan plan = resolve::make_plan(ctx.repository(), packages, targets).value();
    if (opts->github_matrix) return print_github_matrix(plan, targets, target_names, opts->archs);
    return print_plan(plan, ctx.json);
  };
}

}  // namespace kiln::cli
