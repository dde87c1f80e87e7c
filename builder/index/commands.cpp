#include "index/commands.h"

#include "core/strings.h"

namespace kiln::index {

Words pinned_projects(const Target& target) {
  Words out;
  for (const auto& [name, p] : target.projects)
    out.push_back(p.versions.empty() ? name : cat(name, "==", p.versions.back()));
  return out;
}

InstallCommands install_commands(const Target& target, std::string_view index_url,
                                 std::string_view trusted_host) {
  InstallCommands c;
  c.pip = {"pip", "install", "--index-url", std::string(index_url)};
  if (!trusted_host.empty())
    c.pip.insert(c.pip.end(), {"--trusted-host", std::string(trusted_host)});
  c.uv = {"uv", "pip", "install", "--index-url", std::string(index_url)};
  for (const auto& p : pinned_projects(target)) {
    c.pip.push_back(p);
    c.uv.push_back(p);
  }
  return c;
}

ExportCommands export_commands(const Target& target, std::string_view tree_index,
                               std::string_view torch_index, std::string_view fallback) {
  Words indexes = {"--index", std::string(tree_index)};
  if (!torch_index.empty()) indexes.insert(indexes.end(), {"--index", std::string(torch_index)});
  indexes.insert(indexes.end(), {"--default-index", std::string(fallback)});
  ExportCommands c;
  c.uv = {"uv", "pip", "install"};
  c.uv.insert(c.uv.end(), indexes.begin(), indexes.end());
  for (const auto& p : pinned_projects(target)) c.uv.push_back(p);
  c.lock = {"uv", "pip", "compile", "--generate-hashes"};
  c.lock.insert(c.lock.end(), indexes.begin(), indexes.end());
  c.lock.insert(c.lock.end(), {"requirements.in", "-o", "requirements.txt"});
  c.pip = {"pip",
           "install",
           "--require-hashes",
           "--index-url",
           std::string(tree_index),
           "--extra-index-url",
           std::string(fallback),
           "-r",
           "requirements.txt"};
  return c;
}

}  // namespace kiln::index
