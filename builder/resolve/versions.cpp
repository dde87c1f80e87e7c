#include "resolve/versions.h"

#include <algorithm>

#include "core/log.h"
#include "core/strings.h"
#include "packaging/specifier.h"

namespace kiln::resolve {

Expected<std::vector<std::string>> every_version(const manifest::Repository& repo,
                                                 const std::vector<std::string>& names) {
  std::vector<packaging::Requirement> wanted;
  for (const auto& n : names) {
    KILN_TRY(packaging::Requirement r, packaging::parse_requirement(n));
    KILN_CHECK(repo.select(r.name));  // an unknown package: its error (with the nearest name)
    wanted.push_back(std::move(r));
  }
  auto selected = [&](const std::string& normalized) {
    return std::find_if(wanted.begin(), wanted.end(), [&](const packaging::Requirement& r) {
             return r.normalized == normalized;
           }) != wanted.end();
  };
  for (const auto& b : repo.broken())
    if (wanted.empty() || selected(b.package))
      log::warn(cat("left out ", b.package, " ", b.version, ": ", b.error.message));
  // A package's versions that every argument naming it matches, as pip filters them.
  auto matching = [&](const std::string& normalized) {
    std::vector<std::string> versions;
    for (const auto& m : repo.manifests())
      if (m.normalized_name() == normalized) versions.push_back(m.version);
    for (const auto& r : wanted)
      if (r.normalized == normalized)
        versions = r.specifiers.without_local_labels().filter(versions);
    return versions;
  };
  // A local label an argument names stays on the version, for the plan to check against each
  // target ("==1.7.0+cu130torch2.11").
  auto labels_of = [&](const std::string& normalized) {
    std::vector<std::string> labels;
    for (const auto& r : wanted)
      if (r.normalized == normalized)
        for (const auto& label : r.specifiers.local_labels()) labels.push_back(cat("+", label));
    return labels.empty() ? std::vector<std::string>{""} : labels;
  };
  std::vector<std::string> out;
  for (const auto& m : repo.manifests()) {
    if (wanted.empty() ? m.fixture : !selected(m.normalized_name())) continue;
    auto versions = matching(m.normalized_name());
    if (std::find(versions.begin(), versions.end(), m.version) != versions.end())
      for (const auto& label : labels_of(m.normalized_name()))
        out.push_back(cat(m.name, "==", m.version, label));
  }
  return out;
}

std::vector<std::string> loadable_targets(const manifest::Repository& repo) {
  std::vector<std::string> out;
  for (const auto& name : repo.target_names()) {
    auto target = repo.target(name);
    if (target)
      out.push_back(name);
    else
      log::warn(cat("left out target ", name, ": ", target.error().message));
  }
  return out;
}

}  // namespace kiln::resolve
