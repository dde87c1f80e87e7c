#include "cli/serve_routes.h"

#include "cache/store.h"
#include "fetch/index_config.h"
#include "index/serve_policy.h"
#include "init/torch_requirements.h"

namespace kiln::cli {

index::Routes serve_routes(Context& ctx, const std::optional<std::string>& fallback) {
  const cache::Store store(ctx.cache_path());
  index::ServeSources sources;
  sources.repository = ctx.repository_or_error();
  sources.fallback = fallback;
  sources.resolver_index = []() -> Expected<index::ResolverIndex> {
    KILN_TRY(fetch::IndexSetting setting, fetch::configured_index());
    return index::ResolverIndex{setting.url, setting.origin};
  };
  sources.torch_requirements = [&store](const manifest::TorchWheel& w) {
    return init::torch_requirement_names(store, w);
  };
  return index::serve_routes(sources).value();
}

}  // namespace kiln::cli
