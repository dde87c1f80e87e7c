#include "manifest/build_env.h"

#include <algorithm>

#include "core/hash.h"
#include "core/strings.h"
#include "manifest/toml_reader.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

namespace kiln::manifest {

namespace {

PinnedWheel read_wheel(const SourceText& source, const toml::table& table,
                       const std::string& name) {
  TableReader r(source, table, name, {"project", "file", "sha256"});
  PinnedWheel w{r.required_string("project"), r.required_string("file"),
                r.required_string("sha256")};
  if (!packaging::is_valid_project_name(w.project))
    r.fail("project", cat("bad project name '", w.project, "'"));
  if (!packaging::parse_wheel_file_name(w.file) || w.file.find('/') != std::string::npos)
    r.fail("file", cat("'", w.file, "' is not a wheel file name"));
  if (!is_sha256_hex(w.sha256))
    r.fail("sha256", cat("bad sha256 '", w.sha256, "': expected 64 lowercase hexadecimal digits"));
  return w;
}

BuildEnvPins parse_build_env_text(const std::string& text, const std::string& display_path) {
  SourceText source{display_path, text};
  toml::table root = parse_toml(source);
  TableReader top(source, root, "", {"tool", "torch-runtime"});
  BuildEnvPins pins;
  pins.display_path = display_path;
  for (const toml::table* t : top.tables("tool"))
    pins.tools.push_back(read_wheel(source, *t, "tool"));
  bool has_pip = false;
  for (const auto& w : pins.tools)
    has_pip = has_pip || packaging::normalize_name(w.project) == "pip";
  if (!has_pip)
    fail_at(source, top.position(), "the [[tool]] wheels must include pip: it installs the others");
  // pip first: it installs the rest.
  std::stable_partition(pins.tools.begin(), pins.tools.end(), [](const PinnedWheel& w) {
    return packaging::normalize_name(w.project) == "pip";
  });
  for (const toml::table* t : top.tables("torch-runtime")) {
    TableReader r(source, *t, "torch-runtime", {"torch", "wheel"});
    std::string torch = r.required_string("torch");
    if (!packaging::is_canonical_version(torch))
      r.fail("torch", cat("bad torch version '", torch, "'"));
    if (pins.torch_runtime.count(torch))
      r.fail("torch", cat("a second torch-runtime for torch ", torch));
    std::vector<PinnedWheel> wheels;
    for (const toml::table* w : r.tables("wheel"))
      wheels.push_back(read_wheel(source, *w, "torch-runtime.wheel"));
    pins.torch_runtime.emplace(torch, std::move(wheels));
  }
  return pins;
}

nlohmann::json wheels_json(const std::vector<PinnedWheel>& wheels) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& w : wheels) out.push_back({{"file", w.file}, {"sha256", w.sha256}});
  return out;
}

}  // namespace

const std::vector<PinnedWheel>* BuildEnvPins::runtime_for(const std::string& torch_version) const {
  auto it = torch_runtime.find(torch_version);
  return it == torch_runtime.end() ? nullptr : &it->second;
}

nlohmann::json BuildEnvPins::identity(const std::string& torch_version) const {
  nlohmann::json j = {{"tools", wheels_json(tools)}};
  if (const auto* runtime = runtime_for(torch_version)) j["torch_runtime"] = wheels_json(*runtime);
  return j;
}

Expected<BuildEnvPins> parse_build_env(const std::string& text, const std::string& display_path) {
  try {
    return parse_build_env_text(text, display_path);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<std::vector<PinnedWheel>> BuildEnvPins::wheels_for(const Target& target) const {
  const bool pinned_torch = target.torch_source == Target::TorchSource::Pypi;
  const auto* runtime = pinned_torch ? runtime_for(target.torch_version) : nullptr;
  if (pinned_torch && !runtime)
    return Error::bad_input(cat("the setuptools backend cannot import torch ", target.torch_version,
                                " of target ", target.name, ": ", display_path,
                                " pins no [[torch-runtime]] for it (add one, ",
                                "or use a target with torch.source = \"environment\")"));
  std::vector<PinnedWheel> files = tools;
  if (runtime) files.insert(files.end(), runtime->begin(), runtime->end());
  return files;
}

}  // namespace kiln::manifest
