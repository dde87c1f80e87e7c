// kiln validate WHEEL|DIR… [--target T] [--torch-version V] [--archs SPEC] [--gpu sm_XY]
//               [--junit FILE] [--import-with PYTHON] [--lib-dir DIR]… [--offline] [--index-url
//               URL]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"
#include "pipeline/sources.h"
#include "toolchain/cuda.h"
#include "toolchain/torch.h"
#include "validate/validate.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

struct TorchSource {
  // --target, or the target found for --torch-version: failing to get its torch is an error.
  std::optional<manifest::Target> target;
};

// Finds the torch a wheel is checked against and unpacks it into the cache's sysroots (once).
class TorchResolver {
 public:
  TorchResolver(fs::path cache, bool offline, std::string index_url)
      : cache_(std::move(cache)), offline_(offline), index_url_(std::move(index_url)) {}

  Expected<toolchain::TorchSysroot> pinned(const std::string& file, const std::string& sha256) {
    if (auto it = sysroots_.find(sha256); it != sysroots_.end()) return it->second;
    fs::path sysroots = cache_ / "sysroots";
    fs::path dir = sysroots / cat("torch-", sha256.substr(0, 16)) / "torch";
    std::error_code ec;
    toolchain::TorchSysroot t;
    if (fs::exists(dir / "version.py", ec)) {
      KILN_TRY(t, toolchain::read_torch_sysroot(dir));
      t.identity_sha256 = sha256;
    } else {
      if (!fetching_) {
        KILN_TRY(fetching_, pipeline::Fetching::create(cache_, offline_, index_url_));
      }
      log::info(cat("fetching ", file, " to check against its libraries"));
      KILN_TRY(fetch::Fetched got,
               fetch::fetch_index_file(fetching_->context(), "torch", file, sha256));
      KILN_TRY(t, toolchain::torch_from_wheel(got.path, sha256, sysroots));
    }
    sysroots_.emplace(sha256, t);
    return t;
  }

 private:
  fs::path cache_;
  bool offline_;
  std::string index_url_;
  std::unique_ptr<pipeline::Fetching> fetching_;
  std::map<std::string, toolchain::TorchSysroot> sysroots_;
};

// The target pinning torch `version` ("2.10.0"), from the manifests directory.
manifest::Target target_for_torch(const manifest::Repository& repo, const std::string& version) {
  std::vector<std::string> seen;
  for (const auto& name : repo.target_names()) {
    auto t = repo.target(name);
    if (!t) continue;
    seen.push_back(cat(name, " (torch ", t->torch_version, ")"));
    if (t->torch_version == version && t->torch_source == manifest::Target::TorchSource::Pypi)
      return *t;
  }
  raise(Error::bad_input(cat("--torch-version ", version, ": no target under ", repo.dir().string(),
                             "/targets pins torch ", version,
                             " from PyPI (targets: ", join(seen, ", "), ")")));
}

// Fills options.torch (or options.torch_problem) for one wheel.
void choose_torch(const validate::WheelSummary& summary, const TorchSource& source,
                  TorchResolver& resolver, validate::Options& options) {
  bool compiled = std::find(summary.name.platform_tags.begin(), summary.name.platform_tags.end(),
                            "any") == summary.name.platform_tags.end();
  if (!compiled) return;
  if (source.target) {
    const manifest::Target& t = *source.target;
    if (t.torch_source == manifest::Target::TorchSource::Environment) {
      options.torch = toolchain::torch_from_environment(t.interpreter()).value();
      options.torch_note = cat("target ", t.name, ", from ", t.interpreter());
      return;
    }
    for (const auto& abi : summary.name.abi_tags)
      for (const auto& w : t.torch_wheels)
        if (w.python_tag == abi) {
          options.torch = resolver.pinned(w.file, w.sha256).value();
          options.torch_note = cat("target ", t.name);
          return;
        }
    raise(Error::bad_input(
        cat("target ", t.name, " pins no torch wheel for ", join(summary.name.abi_tags, "."))));
  }
  const auto& p = summary.provenance;
  if (!p.is_object() || !p.contains("inputs") || !p["inputs"].contains("toolchain") ||
      !p["inputs"]["toolchain"].is_object() || !p["inputs"]["toolchain"].contains("torch") ||
      !p["inputs"]["toolchain"]["torch"].is_object())
    return;
  const auto& pin = p["inputs"]["toolchain"]["torch"];
  std::string file = pin.value("file", ""), sha = pin.value("sha256", "");
  if (file.empty() || sha.size() != 64) {
    options.torch_problem =
        "the provenance names no pinned torch wheel (torch from an environment): give --target";
    return;
  }
  auto t = resolver.pinned(file, sha);
  if (!t) {
    options.torch_problem = cat("cannot get the torch it was built against: ", t.error().message);
    return;
  }
  options.torch = *t;
  options.torch_note = "the pinned torch of its provenance";
}

// A wheel built with a CUDA toolkit from wheels finds the CUDA runtime in that toolkit, when the
// cache has it (so it validates on a machine without a CUDA toolkit).
void add_wheel_toolkit(const validate::WheelSummary& summary, const fs::path& cache,
                       validate::Options& options) {
  const auto& p = summary.provenance;
  if (!p.is_object() || !p.contains("inputs") || !p["inputs"].is_object() ||
      !p["inputs"].contains("toolchain") || !p["inputs"]["toolchain"].is_object() ||
      !p["inputs"]["toolchain"].contains("cuda"))
    return;
  const auto& cuda = p["inputs"]["toolchain"]["cuda"];
  if (!cuda.is_object() || cuda.value("toolkit", "") != "wheels" || !cuda.contains("wheels") ||
      !cuda["wheels"].is_array())
    return;
  toolchain::CudaRequest request;
  request.toolkit = "wheels";
  request.version = cuda.value("version", "");
  for (const auto& w : cuda["wheels"])
    if (w.is_object()) request.wheels.push_back({w.value("file", ""), w.value("sha256", "")});
  fs::path lib = cache / "toolkits" / toolchain::wheel_toolkit_name(request) / "lib";
  std::error_code ec;
  if (!fs::is_directory(lib, ec)) return;
  std::vector<fs::path> dirs = {lib};
  for (const auto& d :
       options.library_dirs.empty() ? validate::default_library_dirs() : options.library_dirs)
    dirs.push_back(d);
  options.library_dirs = std::move(dirs);
}

}  // namespace

std::function<int()> configure_validate(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> paths, lib_dirs;
    std::string target, torch_version, archs, gpu, junit, index_url, import_with;
    bool offline = false;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("paths", opts->paths, "Wheels, or directories searched for *.whl")->required();
  sub.add_option("-t,--target", opts->target, "Check against this target's torch and archs");
  sub.add_option(
      "--torch-version", opts->torch_version,
      "Check the symbols against another torch: a target under manifests/targets pinning it");
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs,
                     "The archs the wheels must hold code for (default: their provenance's)");
  sub.add_option("--gpu", opts->gpu, "Say whether the wheels run on this GPU, e.g. sm_120");
  sub.add_option("--junit", opts->junit, "Also write a JUnit XML report to FILE");
  sub.add_option(
      "--import-with", opts->import_with,
      "Also install each wheel into a temporary directory and import its modules with this Python");
  sub.add_option("--lib-dir", opts->lib_dirs,
                 "Where to look for the CUDA runtime and C/C++ runtime libraries (repeatable)");
  sub.add_flag("--offline", opts->offline, "Never use the network (torch must be in the cache)");
  sub.add_option("--index-url", opts->index_url, "Package index for torch (default: pip's)");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    validate::Options base;
    if (!opts->archs.empty()) {
      auto parsed = manifest::ArchList::parse(opts->archs);
      if (!parsed) raise(Error::bad_input(cat("--archs: ", parsed.error().message)));
      base.archs = *parsed;
    }
    if (!opts->gpu.empty()) {
      auto parsed = manifest::ArchList::parse(opts->gpu);
      if (!parsed || parsed->archs().size() != 1)
        raise(
            Error::bad_input(cat("--gpu ", opts->gpu, ": name one GPU arch, e.g. sm_90 or 12.0")));
      base.gpu = parsed->archs().front();
    }
    if (!opts->import_with.empty()) {
      // A path stays as given (a venv's python must keep its own path), made absolute.
      fs::path python = opts->import_with.find('/') != std::string::npos
                            ? absolute_path(opts->import_with)
                            : find_program(opts->import_with);
      std::error_code ec;
      if (python.empty() || !fs::exists(python, ec))
        raise(Error::bad_input(cat("--import-with ", opts->import_with, ": no such program")));
      base.import_with = python.string();
    }
    for (const auto& d : opts->lib_dirs) base.library_dirs.push_back(absolute_path(d));
    if (!base.library_dirs.empty())
      for (const auto& d : validate::default_library_dirs()) base.library_dirs.push_back(d);

    TorchSource source;
    if (!opts->target.empty()) {
      source.target = ctx.repository().target(opts->target).value();
      if (!opts->torch_version.empty() && source.target->torch_version != opts->torch_version)
        raise(Error::bad_input(cat("--target ", opts->target, " pins torch ",
                                   source.target->torch_version, ", not --torch-version ",
                                   opts->torch_version)));
      if (!base.archs) {
        base.archs = source.target->archs;
        base.archs_from = cat("target ", opts->target);
      }
    } else if (!opts->torch_version.empty()) {
      source.target = target_for_torch(ctx.repository(), opts->torch_version);
    }

    std::vector<fs::path> wheels;
    for (const auto& p : opts->paths) {
      std::vector<fs::path> found = validate::find_wheels(absolute_path(p)).value();
      wheels.insert(wheels.end(), found.begin(), found.end());
    }
    TorchResolver resolver(ctx.cache_path(), opts->offline, opts->index_url);
    std::vector<validate::Report> reports;
    for (const auto& wheel : wheels) {
      validate::WheelSummary summary = validate::summarize(wheel).value();
      validate::Options options = base;
      choose_torch(summary, source, resolver, options);
      add_wheel_toolkit(summary, ctx.cache_path(), options);
      reports.push_back(validate::validate_wheel(wheel, options).value());
      if (!ctx.json)
        std::cout << validate::render_text(reports.back(), ctx.verbosity > 0) << std::flush;
    }
    if (ctx.json) std::cout << validate::render_json(reports).dump(2) << "\n";
    if (!opts->junit.empty())
      write_file_atomic(absolute_path(opts->junit), validate::render_junit(reports)).value();
    bool ok = std::all_of(reports.begin(), reports.end(),
                          [](const validate::Report& r) { return r.ok(); });
    if (!ok) {
      std::size_t failed = std::count_if(reports.begin(), reports.end(),
                                         [](const validate::Report& r) { return !r.ok(); });
      log::error(cat(failed, " of ", reports.size(), " wheel(s) failed validation"));
    }
    return ok ? 0 : 1;
  };
}

}  // namespace kiln::cli
