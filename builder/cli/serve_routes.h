// `kiln serve` and `kiln index export`'s routes (index/serve_policy.h) from the global options:
// the manifests directory, the cache's downloads, the index kiln resolves with.
#pragma once

#include <optional>
#include <string>

#include "cli/context.h"
#include "index/routes.h"

namespace kiln::cli {

// `fallback`: --fallback-url when given, "" for --no-fallback, nullopt for the default.
index::Routes serve_routes(Context& ctx, const std::optional<std::string>& fallback);

}  // namespace kiln::cli
