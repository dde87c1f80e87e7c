#include "compile/backend.h"

#include <array>

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
