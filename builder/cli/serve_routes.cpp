#include "cli/serve_routes.h"

#include "cache/store.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/index_config.h"
#include "init/torch_requirements.h"
#include "packaging/name.h"

namespace kiln::cli {

std::set<std::string, std::less<>> own_names(Context& ctx) {
  // kiln's own tool wheel is always kiln's to answer for, with or without <cache>/kiln-wheels/:
  // redirected, `uvx --from kiln-wheels` would take whatever another index calls by that name.
  std::set<std::string, std::less<>> names{"kiln-wheels"};
  auto add = [&](std::string name) {
    if (index::is_project_name(name)) names.insert(std::move(name));
  };
  try {
    for (const auto& m : ctx.repository().manifests()) add(packaging::normalize_name(m.name));
    for (const auto& b : ctx.repository().broken()) add(packaging::normalize_name(b.package));
  } catch (const KilnError& e) {
    log::warn(cat("kiln's own project names: only the cache's (", e.what(), ")"));
  }
  return names;
}

std::string default_fallback() {
  auto setting = fetch::configured_index().value();
  auto url = index::check_upstream_url(setting.url);
  if (!url)
    raise(Error::bad_input(cat(url.error().message, " (from ", setting.origin,
                               "): give --fallback-url, or --no-fallback")));
  return *url;
}

index::Routes serve_routes(Context& ctx, const std::optional<std::string>& fallback) {
  index::Routes routes;
  routes.own = own_names(ctx);
  routes.fallback = !fallback           ? default_fallback()
                    : fallback->empty() ? std::string()
                                        : index::check_upstream_url(*fallback).value();
  std::vector<std::string> names;
  try {
    names = ctx.repository().target_names();
  } catch (const KilnError&) {
    return routes;  // own_names said why
  }
  const cache::Store store(ctx.cache_path());
  for (const auto& name : names) {
    auto target = ctx.repository().target(name);
    if (!target) {
      log::warn(cat("target ", name, " not served until it loads: ", target.error().message));
      continue;
    }
    index::TargetUpstream& up = routes.targets[name];
    index::TargetFacts& facts = routes.declared[name];
    facts.torch = target->torch_version;
    facts.cuda = target->cuda_version;
    for (const auto& w : target->torch_wheels) facts.python.push_back(w.python_tag);
    facts.archs = split(target->archs.canonical(), ";");
    if (target->torch_index_url.empty()) continue;
    up.names = {"torch"};
    auto url = index::check_upstream_url(target->torch_index_url);
    if (url)
      up.url = *url;
    else  // never the fallback's torch, which may be another CUDA's build of the same version
      log::warn(cat("target ", name,
                    ": torch and its requirements are not found here: ", url.error().message));
    for (const auto& w : target->torch_wheels)
      up.names.merge(init::torch_requirement_names(store, w));
  }
  return routes;
}

}  // namespace kiln::cli
