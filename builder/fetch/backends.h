// The source backends behind make_source(), one file each (internal to fetch/).
#pragma once

#include <memory>

#include "fetch/source.h"

namespace kiln::fetch {

std::unique_ptr<Source> make_pypi_source(const manifest::Source& source, Context& context);
std::unique_ptr<Source> make_url_source(const manifest::Source& source, Context& context);
std::unique_ptr<Source> make_git_source(const manifest::Source& source, Context& context);
std::unique_ptr<Source> make_local_source(const manifest::Source& source, Context& context);

}  // namespace kiln::fetch
