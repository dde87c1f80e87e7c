// What `kiln serve` and `kiln index export` answer for besides the cache's wheels, as `Routes`:
// kiln's own project names, per target of the manifests directory where torch comes from, and the
// fallback. What index/ cannot know itself (the index kiln resolves with, what a pinned torch wheel
// requires) the caller gives as functions.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>

#include "core/expected.h"
#include "index/routes.h"
#include "manifest/repository.h"

namespace kiln::index {

// The index kiln resolves with and where that setting came from ("$PIP_INDEX_URL", a pip.conf,
// "default"), as fetch::configured_index finds it.
struct ResolverIndex {
  std::string url, origin;
};

struct ServeSources {
  // The manifests directory, or why it did not load: then kiln's own names are kiln-wheels alone
  // (a warning says why) and no target is known before the cache has wheels for it.
  Expected<const manifest::Repository*> repository = Error::failed("no manifests directory");
  // --fallback-url when given, "" for --no-fallback, nullopt for the default: `resolver_index`.
  std::optional<std::string> fallback;
  // Asked only for the default fallback.
  std::function<Expected<ResolverIndex>()> resolver_index;
  // The projects a target's pinned torch wheel requires, normalised (none when it is not in the
  // cache's downloads): init::torch_requirement_names.
  std::function<std::set<std::string, std::less<>>(const manifest::TorchWheel&)> torch_requirements;
};

// Every manifest's name (normalised, broken ones too) and kiln's own tool wheel's (kiln-wheels);
// only kiln-wheels, with a warning, when the manifests directory did not load.
std::set<std::string, std::less<>> own_names(const Expected<const manifest::Repository*>& repo);

// The routes: `own_names`; the fallback (a BadInput error when the default is not an upstream
// kiln can redirect to); each target that loads routes torch, and the requirements of its pinned
// torch wheels, to its `[torch] index-url` (a target that does not load is named on stderr).
Expected<Routes> serve_routes(const ServeSources& sources);

}  // namespace kiln::index
