#include "pipeline/validate_inputs.h"

#include <algorithm>

#include "archive/unpack.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/source.h"
#include "manifest/toolkit.h"
#include "pipeline/pins.h"
#include "toolchain/cuda.h"

namespace kiln::pipeline {

namespace fs = std::filesystem;

Expected<manifest::Target> target_for_torch(const manifest::Repository& repo,
                                            const std::string& version) {
  std::vector<std::string> seen;
  for (const auto& name : repo.target_names()) {
    auto t = repo.target(name);
    if (!t) continue;
    seen.push_back(cat(name, " (torch ", t->torch_version, ")"));
    if (t->torch_version == version && t->torch_source == manifest::Target::TorchSource::Pypi)
      return *t;
  }
  return Error::bad_input(cat("--torch-version ", version, ": no target under ",
                              repo.dir().string(), "/targets pins torch ", version,
                              " from PyPI (targets: ", join(seen, ", "), ")"));
}

ValidateInputs::ValidateInputs(fs::path cache, bool offline, std::string index_url,
                               std::optional<manifest::Target> target)
    : store_(std::move(cache)),
      offline_(offline),
      index_url_(std::move(index_url)),
      target_(std::move(target)) {}

Expected<validate::Options> ValidateInputs::options_for(const validate::WheelSummary& summary,
                                                        validate::Options base) {
  KILN_CHECK(choose_torch(summary, base));
  add_wheel_toolkit(summary, base);
  add_upstream(summary, base);
  return base;
}

// The sdist's PKG-INFO (and egg-info entry points), read from the download cache.
void ValidateInputs::add_upstream(const validate::WheelSummary& summary,
                                  validate::Options& options) const {
  const auto& p = summary.provenance;
  if (!p || !p->facts.source || p->facts.source->sha256.empty()) {
    options.upstream_note = "the wheel names no downloaded source (kiln.json)";
    return;
  }
  const auto& source = *p->facts.source;
  auto sdist = store_.downloaded(source.sha256, source.file);
  if (!sdist) {
    options.upstream_note = cat("its sdist ", source.file, " is not in the download cache");
    return;
  }
  auto upstream = read_sdist_metadata(*sdist, store_);
  if (!upstream)
    options.upstream_note = cat("cannot read ", source.file, ": ", upstream.error().message);
  else if (upstream->origin.empty())
    options.upstream_note = cat(source.file, " has no PKG-INFO");
  else
    options.upstream = std::move(*upstream);
}

Expected<wheel::UpstreamMetadata> read_sdist_metadata(const fs::path& sdist,
                                                      const cache::Store& store) {
  KILN_TRY(cache::Staging scratch, store.staging("sdist-"));
  archive::UnpackOptions options;
  options.limits.max_total_bytes = 64u << 20;
  options.filter = [](std::string_view path) {
    auto parts = split(path, "/", /*skip_empty=*/false);
    return (parts.size() == 2 && parts[1] == "PKG-INFO") ||
           (parts.size() == 3 && parts[1].ends_with(".egg-info") && parts[2] == "entry_points.txt");
  };
  KILN_TRY(archive::UnpackResult unpacked, archive::unpack(sdist, scratch.path() / "x", options));
  if (unpacked.top_level.size() != 1) return wheel::UpstreamMetadata{};
  return wheel::read_upstream_metadata(scratch.path() / "x" / unpacked.top_level.front());
}

// The pinned torch wheel's sysroot: from the cache's sysroots, else fetched and unpacked there.
Expected<toolchain::TorchSysroot> ValidateInputs::pinned(const std::string& file,
                                                         const std::string& sha256,
                                                         const std::string& index_url) {
  if (auto it = sysroots_.find(sha256); it != sysroots_.end()) return it->second;
  toolchain::TorchSysroot t;
  if (auto dir = store_.find_made(cache::torch_sysroot(sha256))) {
    KILN_TRY(t, toolchain::cached_torch_sysroot(*dir, sha256));
  } else {
    if (!fetching_) {
      KILN_TRY(fetching_, Fetching::create(store_, offline_, index_url_));
    }
    log::info(cat("fetching ", file, " to check against its libraries"));
    KILN_TRY(fetch::Fetched got, fetch_pinned(*fetching_, {"torch", file, sha256, "", index_url}));
    KILN_TRY(t, toolchain::torch_from_wheel(got.path, sha256, store_));
  }
  sysroots_.emplace(sha256, t);
  return t;
}

// Sets options.torch (or options.torch_problem) for a compiled wheel.
Expected<void> ValidateInputs::choose_torch(const validate::WheelSummary& summary,
                                            validate::Options& options) {
  const auto& platforms = summary.name.platform_tags;
  if (std::find(platforms.begin(), platforms.end(), "any") != platforms.end()) return {};
  if (target_) {
    const manifest::Target& t = *target_;
    if (t.torch_source == manifest::Target::TorchSource::Environment) {
      KILN_TRY(options.torch, toolchain::torch_from_environment(t.interpreter()));
      options.torch_note = cat("target ", t.name, ", from ", t.interpreter());
      return {};
    }
    for (const auto& abi : summary.name.abi_tags)
      for (const auto& w : t.torch_wheels)
        if (w.python_tag == abi) {
          KILN_TRY(options.torch, pinned(w.file, w.sha256, t.torch_index_url));
          options.torch_note = cat("target ", t.name);
          return {};
        }
    return Error::bad_input(
        cat("target ", t.name, " pins no torch wheel for ", join(summary.name.abi_tags, ".")));
  }
  if (!summary.provenance || !summary.provenance->facts.torch) return {};
  const auto& pin = *summary.provenance->facts.torch;
  if (pin.file.empty() || pin.sha256.size() != 64) {
    options.torch_problem =
        "the provenance names no pinned torch wheel (torch from an environment): give --target";
    return {};
  }
  auto t = pinned(pin.file, pin.sha256);
  if (!t) {
    options.torch_problem = cat("cannot get the torch it was built against: ", t.error().message);
    return {};
  }
  options.torch = *t;
  options.torch_note = "the pinned torch of its provenance";
  return {};
}

// A wheel built with a CUDA toolkit from wheels or Debian packages finds the CUDA runtime in that
// toolkit, when the cache has it (so it validates on a machine without a CUDA toolkit).
void ValidateInputs::add_wheel_toolkit(const validate::WheelSummary& summary,
                                       validate::Options& options) const {
  if (!summary.provenance || !summary.provenance->facts.cuda) return;
  const auto& cuda = *summary.provenance->facts.cuda;
  auto kind = manifest::parse_toolkit_kind(cuda.toolkit);
  if (!kind) return;
  toolchain::CudaRequest request;
  request.toolkit = *kind;
  request.version = cuda.version;
  cache::MadeOnce made;
  std::string lib;
  if (*kind == manifest::ToolkitKind::Wheels && cuda.wheels) {
    for (const auto& w : *cuda.wheels) request.wheels.push_back({w.file, w.sha256});
    made = toolchain::wheel_toolkit_of(request);
    lib = "lib";
  } else if (*kind == manifest::ToolkitKind::Debian && cuda.debs) {
    for (const auto& d : *cuda.debs) request.debs.push_back({d.path, d.sha256});
    made = toolchain::debian_toolkit_of(request);
    lib = "lib64";
  } else {
    return;
  }
  auto toolkit = store_.find_made(made);
  std::error_code ec;
  if (!toolkit || !fs::is_directory(*toolkit / lib, ec)) return;
  std::vector<fs::path> dirs = {*toolkit / lib};
  for (const auto& d :
       options.library_dirs.empty() ? validate::default_library_dirs() : options.library_dirs)
    dirs.push_back(d);
  options.library_dirs = std::move(dirs);
}

}  // namespace kiln::pipeline
