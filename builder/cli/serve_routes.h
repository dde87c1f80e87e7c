// What `kiln serve` and `kiln index export` answer for besides the cache's wheels: kiln's own
// project names and, per target of the manifests directory, where torch comes from.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>

#include "cli/context.h"
#include "index/model.h"
#include "index/routes.h"

namespace kiln::cli {

// Every manifest's name (normalised) and kiln's own tool wheel's (kiln-wheels).
std::set<std::string, std::less<>> own_names(Context& ctx);

// The index kiln resolves with (--index-url, $PIP_INDEX_URL, pip's config, PyPI), as an upstream.
std::string default_fallback();

// `fallback`: --fallback-url when given, "" for --no-fallback, nullopt for the default (the index
// kiln resolves with). Each target of the manifests directory routes torch, and the requirements
// of its pinned torch wheels found in the cache's downloads, to its `[torch] index-url`.
index::Routes serve_routes(Context& ctx, const std::optional<std::string>& fallback);

}  // namespace kiln::cli
