#include "fetch/source.h"

#include "fetch/backends.h"

namespace kiln::fetch {

std::unique_ptr<Source> make_source(const manifest::Source& source, Context& context) {
  switch (source.kind) {
    case manifest::Source::Kind::Pypi:
      return make_pypi_source(source, context);
    case manifest::Source::Kind::Url:
      return make_url_source(source, context);
    case manifest::Source::Kind::Git:
      return make_git_source(source, context);
    case manifest::Source::Kind::Local:
      return make_local_source(source, context);
  }
  return nullptr;
}

}  // namespace kiln::fetch
