// kiln validate WHEEL|DIR… [--target T] [--torch-version V] [--archs SPEC] [--gpu sm_XY]
//               [--junit FILE] [--import-with PYTHON] [--lib-dir DIR]… [--offline] [--index-url
//               URL]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <optional>

#include "cli/context.h"
#include "cli/reports.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/process.h"
#include "core/sandbox.h"
#include "core/strings.h"
#include "pipeline/validate_inputs.h"
#include "validate/validate.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

struct ValidateArgs {
  std::vector<std::string> paths, lib_dirs;
  std::string target, torch_version, archs, gpu, junit, index_url, import_with;
  bool offline = false;
};

// The checks' options every wheel shares: --archs, --gpu, --import-with, --lib-dir.
validate::Options base_options(const ValidateArgs& args) {
  validate::Options base;
  if (!args.archs.empty()) {
    auto parsed = manifest::ArchList::parse(args.archs);
    if (!parsed) raise(Error::bad_input(cat("--archs: ", parsed.error().message)));
    base.archs = *parsed;
  }
  if (!args.gpu.empty()) {
    auto parsed = manifest::ArchList::parse(args.gpu);
    if (!parsed || parsed->archs().size() != 1)
      raise(Error::bad_input(cat("--gpu ", args.gpu, ": name one GPU arch, e.g. sm_90 or 12.0")));
    base.gpu = parsed->archs().front();
  }
  if (!args.import_with.empty()) {
    // A path stays as given (a venv's python must keep its own path), made absolute.
    fs::path python = args.import_with.find('/') != std::string::npos
                          ? absolute_path(args.import_with)
                          : find_program(args.import_with);
    std::error_code ec;
    if (python.empty() || !fs::exists(python, ec))
      raise(Error::bad_input(cat("--import-with ", args.import_with, ": no such program")));
    base.import_with = python.string();
  }
  for (const auto& d : args.lib_dirs) base.library_dirs.push_back(absolute_path(d));
  if (!base.library_dirs.empty())
    for (const auto& d : validate::default_library_dirs()) base.library_dirs.push_back(d);
  return base;
}

// --target (whose archs become the default request), or the target pinning --torch-version.
std::optional<manifest::Target> chosen_target(Context& ctx, const ValidateArgs& args,
                                              validate::Options& base) {
  if (!args.target.empty()) {
    manifest::Target target = ctx.repository().target(args.target).value();
    if (!args.torch_version.empty() && target.torch_version != args.torch_version)
      raise(Error::bad_input(cat("--target ", args.target, " pins torch ", target.torch_version,
                                 ", not --torch-version ", args.torch_version)));
    if (!base.archs) {
      base.archs = target.archs;
      base.archs_from = cat("target ", args.target);
    }
    return target;
  }
  if (!args.torch_version.empty())
    return pipeline::target_for_torch(ctx.repository(), args.torch_version).value();
  return std::nullopt;
}

int run_validate(Context& ctx, const ValidateArgs& args) {
  validate::Options base = base_options(args);
  base.sandbox = *parse_sandbox_mode(ctx.defaults.sandbox);
  std::optional<manifest::Target> target = chosen_target(ctx, args, base);
  std::vector<fs::path> wheels;
  for (const auto& p : args.paths) {
    std::vector<fs::path> found = validate::find_wheels(absolute_path(p)).value();
    wheels.insert(wheels.end(), found.begin(), found.end());
  }
  pipeline::ValidateInputs inputs(ctx.cache_path(), ctx.offline(args.offline),
                                  ctx.index_url(args.index_url), target);
  std::vector<validate::Report> reports;
  for (const auto& wheel : wheels) {
    validate::WheelSummary summary = validate::summarize(wheel).value();
    validate::Options options = inputs.options_for(summary, base).value();
    reports.push_back(validate::validate_wheel(wheel, options).value());
    if (!ctx.json)
      std::cout << validate::render_text(reports.back(), ctx.verbosity > 0) << std::flush;
  }
  return finish_reports(ctx, reports, args.junit, "validation");
}

}  // namespace

std::function<int()> configure_validate(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<ValidateArgs>();
  sub.footer(
      "Standard checks fail any wheel that installers or the specifications would refuse "
      "(METADATA as the packaging library validates it). kiln's rules for the wheels it builds "
      "(Requires-Python present; the version canonical; Project-URL 'Label, URL'; every module "
      "imported from the wheel's own packages in it; every extension exporting PyInit_<name>; "
      "for compiled wheels the torch==M.m.* pin and +cuXYtorchM.m label matching kiln.json) fail "
      "wheels with a .dist-info/kiln.json and only warn on others.");
  sub.add_option("paths", opts->paths, "Wheels, or directories searched for *.whl")->required();
  sub.add_option("-t,--target", opts->target, "Check against this target's torch and archs")
      ->type_name(kTargetValue);
  sub.add_option(
      "--torch-version", opts->torch_version,
      "Check the symbols against another torch: a target under manifests/targets pinning it");
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs,
                     "The archs the wheels must hold code for (default: their provenance's)")
          ->type_name(kArchsValue);
  sub.add_option("--gpu", opts->gpu, "Say whether the wheels run on this GPU, e.g. sm_120");
  sub.add_option("--junit", opts->junit, "Also write a JUnit XML report to FILE");
  sub.add_option(
      "--import-with", opts->import_with,
      "Also install each wheel into a temporary directory and import its modules with this Python");
  // One directory per --lib-dir (repeatable), so the wheels after it stay positional.
  sub.add_option("--lib-dir", opts->lib_dirs,
                 "Where to look for the CUDA runtime and C/C++ runtime libraries (repeatable)")
      ->allow_extra_args(false);
  sub.add_flag("--offline", opts->offline, "Never use the network (torch must be in the cache)");
  sub.add_option("--index-url", opts->index_url, "Package index for torch (default: pip's)");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    return run_validate(ctx, *opts);
  };
}

}  // namespace kiln::cli
