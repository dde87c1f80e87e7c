#include "compile/backend.h"

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
  return b;
}

std::unique_ptr<Backend> make_backend(manifest::Backend kind) {
  switch (kind) {
    case manifest::Backend::Native:
      return native_backend();
    case manifest::Backend::Setuptools:
      return setuptools_backend();
    case manifest::Backend::Pure:
      break;
  }
  return pure_backend();
}

}  // namespace kiln::compile
