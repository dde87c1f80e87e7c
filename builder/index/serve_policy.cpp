#include "index/serve_policy.h"

#include "core/log.h"
#include "core/strings.h"
#include "packaging/name.h"

namespace kiln::index {

namespace {

// --fallback-url when given, none for --no-fallback, else the index kiln resolves with.
Expected<std::string> fallback_url(const ServeSources& sources) {
  if (sources.fallback) {
    if (sources.fallback->empty()) return std::string();
    return check_upstream_url(*sources.fallback);
  }
  KILN_TRY(ResolverIndex setting, sources.resolver_index());
  auto url = check_upstream_url(setting.url);
  if (!url)
    return Error::bad_input(cat(url.error().message, " (from ", setting.origin,
                                "): give --fallback-url, or --no-fallback"));
  return url;
}

// What a target of the manifests directory declares, and where its torch comes from.
void add_target(Routes& routes, const ServeSources& sources, const std::string& name,
                const manifest::Target& target) {
  TargetUpstream& up = routes.targets[name];
  TargetFacts& facts = routes.declared[name];
  facts.torch = target.torch_version;
  facts.cuda = target.cuda_version;
  for (const auto& w : target.torch_wheels) facts.python.push_back(w.python_tag);
  facts.archs = split(target.archs.canonical(), ";");
  if (target.torch_index_url.empty()) return;
  up.names = {"torch"};
  auto url = check_upstream_url(target.torch_index_url);
  if (url)
    up.url = *url;
  else  // never the fallback's torch, which may be another CUDA's build of the same version
    log::warn(cat("target ", name,
                  ": torch and its requirements are not found here: ", url.error().message));
  for (const auto& w : target.torch_wheels) up.names.merge(sources.torch_requirements(w));
}

}  // namespace

std::set<std::string, std::less<>> own_names(const Expected<const manifest::Repository*>& repo) {
  // kiln's own tool wheel is always kiln's to answer for, with or without <cache>/kiln-wheels/:
  // redirected, `uvx --from kiln-wheels` would take whatever another index calls by that name.
  std::set<std::string, std::less<>> names{"kiln-wheels"};
  if (!repo) {
    log::warn(cat("kiln's own project names: only the cache's (", repo.error().message, ")"));
    return names;
  }
  auto add = [&](std::string name) {
    if (is_project_name(name)) names.insert(std::move(name));
  };
  for (const auto& m : (*repo)->manifests()) add(packaging::normalize_name(m.name));
  for (const auto& b : (*repo)->broken()) add(packaging::normalize_name(b.package));
  return names;
}

Expected<Routes> serve_routes(const ServeSources& sources) {
  Routes routes;
  routes.own = own_names(sources.repository);
  KILN_TRY(routes.fallback, fallback_url(sources));
  if (!sources.repository) return routes;
  const manifest::Repository& repo = **sources.repository;
  for (const auto& name : repo.target_names()) {
    auto target = repo.target(name);
    if (target)
      add_target(routes, sources, name, *target);
    else
      log::warn(cat("target ", name, " not served until it loads: ", target.error().message));
  }
  return routes;
}

}  // namespace kiln::index
