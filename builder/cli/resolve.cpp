// kiln resolve [PACKAGES…] [--target T]… [--archs SPEC] [--all-versions] [--github-matrix]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli/context.h"
#include "cli/table.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "manifest/backend.h"
#include "packaging/specifier.h"
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

// --all-versions: every manifest ("name==version", with the local label an argument named) of the
// named packages that their specifiers match (default: of every package but test fixtures); a
// manifest that failed to load is named on stderr and left out.
std::vector<std::string> every_version(const manifest::Repository& repo,
                                       const std::vector<std::string>& names) {
  std::vector<packaging::Requirement> wanted;
  for (const auto& n : names) {
    packaging::Requirement r = packaging::parse_requirement(n).value();
    repo.select(r.name).value();  // an unknown package: its error (with the nearest name)
    wanted.push_back(std::move(r));
  }
  auto selected = [&](const std::string& normalized) {
    return std::find_if(wanted.begin(), wanted.end(), [&](const packaging::Requirement& r) {
             return r.normalized == normalized;
           }) != wanted.end();
  };
  for (const auto& b : repo.broken())
    if (wanted.empty() || selected(b.package))
      log::warn(cat("left out ", b.package, " ", b.version, ": ", b.error.message));
  // A package's versions that every argument naming it matches, as pip filters them.
  auto matching = [&](const std::string& normalized) {
    std::vector<std::string> versions;
    for (const auto& m : repo.manifests())
      if (m.normalized_name() == normalized) versions.push_back(m.version);
    for (const auto& r : wanted)
      if (r.normalized == normalized)
        versions = r.specifiers.without_local_labels().filter(versions);
    return versions;
  };
  // A local label an argument names stays on the version, for the plan to check against each
  // target ("==1.7.0+cu130torch2.11").
  auto labels_of = [&](const std::string& normalized) {
    std::vector<std::string> labels;
    for (const auto& r : wanted)
      if (r.normalized == normalized)
        for (const auto& label : r.specifiers.local_labels()) labels.push_back(cat("+", label));
    return labels.empty() ? std::vector<std::string>{""} : labels;
  };
  std::vector<std::string> out;
  for (const auto& m : repo.manifests()) {
    if (wanted.empty() ? m.fixture : !selected(m.normalized_name())) continue;
    auto versions = matching(m.normalized_name());
    if (std::find(versions.begin(), versions.end(), m.version) != versions.end())
      for (const auto& label : labels_of(m.normalized_name()))
        out.push_back(cat(m.name, "==", m.version, label));
  }
  return out;
}

// --all-versions without --target: every target of the manifests directory that loads here; the
// others are named on stderr and left out.
std::vector<std::string> loadable_targets(const manifest::Repository& repo) {
  std::vector<std::string> out;
  for (const auto& name : repo.target_names()) {
    auto target = repo.target(name);
    if (target)
      out.push_back(name);
    else
      log::warn(cat("left out target ", name, ": ", target.error().message));
  }
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
  auto opts = std::make_shared<Options>();
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
      packages = every_version(ctx.repository(), opts->packages);
      if (packages.empty()) raise(Error::bad_input("no package manifests to resolve"));
      if (every_target) target_names = loadable_targets(ctx.repository());
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
