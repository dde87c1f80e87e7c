#include "compile/backend.h"

namespace kiln::compile {

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
