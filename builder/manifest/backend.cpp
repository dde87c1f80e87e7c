#include "manifest/backend.h"

#include <array>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

constexpr std::array<BackendSpec, 3> kBackends = {{
    // name, compiles, needs_build_env, builds_extensions, ships_packages_only
    {"native", true, false, true, false},
    {"setuptools", true, true, false, false},
    {"pure", false, false, false, true},
}};

}  // namespace

std::span<const BackendSpec> backends() {
  return kBackends;
}

const BackendSpec& default_backend() {
  return kBackends.front();
}

const BackendSpec* backend_named(std::string_view name) {
  for (const auto& b : kBackends)
    if (b.name == name) return &b;
  return nullptr;
}

std::string backend_names() {
  std::string out;
  for (std::size_t i = 0; i < kBackends.size(); ++i)
    out += cat(i == 0 ? "" : i + 1 == kBackends.size() ? " or " : ", ", kBackends[i].name);
  return out;
}

}  // namespace kiln::manifest
