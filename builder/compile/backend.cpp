#include "compile/backend.h"

#include <array>

#include "core/log.h"
#include "core/strings.h"

namespace kiln::compile {

CompileBasics compile_basics(const BuildRequest& request) {
  CompileBasics b;
  b.manifest = request.manifest;
  b.root = request.root;
  b.python = request.toolchain->python;
  b.cuda = request.toolchain->cuda;
  b.cxx = request.toolchain->cxx;
  b.archs = request.archs;
  b.jobs = request.jobs;
  b.manylinux = request.manylinux;
  b.sandbox = request.sandbox;
  return b;
}

Expected<BuildOutput> build_alone(const Backend& backend, const BuildRequest& request) {
  for (int attempt = 0;; ++attempt) {
    KILN_TRY(PlannedBuild planned, backend.plan(request));
    RunnerOptions options;
    options.slots = request.jobs > 0 ? request.jobs : default_slots();
    auto ran = run_jobs(planned.jobs, options);
    if (!ran && *planned.stale && attempt < 2) {
      log::warn(cat(ran.error().message, "; planning the build again"));
      continue;
    }
    KILN_TRY(JobStats stats, std::move(ran));
    KILN_TRY(BuildOutput out, planned.finish());
    for (auto& t : out.stats.timings) stats.timings.push_back(std::move(t));
    out.stats = std::move(stats);
    return out;
  }
}

namespace {

constexpr std::array<Implementation, 3> kImplementations = {{
    {"native", native_backend},
    {"setuptools", setuptools_backend},
    {"pure", pure_backend},
}};

}  // namespace

std::span<const Implementation> implementations() {
  return kImplementations;
}

Expected<std::unique_ptr<Backend>> make_backend(const manifest::BackendSpec& spec,
                                                std::span<const Implementation> table) {
  for (const auto& i : table)
    if (i.name == spec.name) return i.make();
  return Error::failed(cat("the ", spec.name, " backend has no build in this kiln"));
}

}  // namespace kiln::compile
