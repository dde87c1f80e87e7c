// The setuptools backend's pinned build environment: manifests/tools/setuptools-env.toml (a copy
// is built into kiln). The tools every such environment holds, and per torch version the wheels
// that a torch installed from its pinned wheel needs to be imported. docs/manifest.md documents it.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/target.h"

namespace kiln::manifest {

struct PinnedWheel {
  std::string project;  // on the package index
  std::string file;
  std::string sha256;
};

struct BuildEnvPins {
  std::string display_path;
  std::vector<PinnedWheel> tools;                                 // pip first
  std::map<std::string, std::vector<PinnedWheel>> torch_runtime;  // torch version -> wheels

  // The runtime wheels of a torch version, or nullptr when the file has none for it.
  const std::vector<PinnedWheel>* runtime_for(const std::string& torch_version) const;
  // What an environment for `torch_version` holds ("" for a torch from the environment): the
  // part of a setuptools build's key these pins contribute.
  nlohmann::json identity(const std::string& torch_version) const;
  // What the environment for `target` installs: `tools` (pip first), then the runtime of the
  // target's torch when it is pinned (not one from an environment); an error naming the file
  // when it pins no runtime for that torch.
  Expected<std::vector<PinnedWheel>> wheels_for(const Target& target) const;
};

Expected<BuildEnvPins> parse_build_env(const std::string& text, const std::string& display_path);

// The text of manifests/tools/setuptools-env.toml as it was when kiln was built.
extern const char* const kEmbeddedBuildEnv;

}  // namespace kiln::manifest
