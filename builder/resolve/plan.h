// Resolve: manifests + targets -> the plan, one item per (package, target), each with its build
// key: sha256 over a canonical serialisation of every input that can change the wheel's bytes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/repository.h"

namespace kiln::resolve {

// Bump by hand whenever kiln changes how it turns the same inputs into different bytes.
constexpr int kRecipeVersion = 2;  // 2: nvcc in a PID namespace

// A target with what kiln learned about its toolchain on this machine.
struct ResolvedTarget {
  manifest::Target target;
  nlohmann::json toolchain;  // probed identities (python, cuda, cxx, torch wheel)
  std::string python_tag;    // "cp311"
};

struct PlanItem {
  const manifest::Manifest* manifest = nullptr;
  std::string target_name;
  std::string key;          // 64 hex digits
  nlohmann::json inputs;    // what the key hashes
};

struct Plan {
  std::vector<ResolvedTarget> targets;
  std::vector<PlanItem> items;
  manifest::BuildEnvPins build_env;  // the setuptools backend's pins
  std::vector<std::shared_ptr<const manifest::Manifest>> overridden;  // copies with another backend
};

// Probes the target's Python, CUDA toolkit and host compiler; checks CUDA against the target.
Expected<ResolvedTarget> resolve_target(const manifest::Target& target);

// The inputs a package's key covers, given its target (null toolchain for pure packages) and, for
// the setuptools backend, the pins of its build environment.
Expected<nlohmann::json> key_inputs(const manifest::Manifest& manifest, const ResolvedTarget& target,
                                    const manifest::BuildEnvPins* build_env = nullptr);
std::string key_of(const nlohmann::json& inputs);

// `packages` empty: the newest manifest of every package. `backend`: build them with this backend
// instead of their manifests' (it is part of their keys).
Expected<Plan> make_plan(const manifest::Repository& repo, const std::vector<std::string>& packages,
                         const std::vector<manifest::Target>& targets,
                         std::optional<manifest::Backend> backend = std::nullopt);

}  // namespace kiln::resolve
