#include "manifest/backend.h"

#include <array>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

constexpr std::array<BackendSpec, 3> kBackends = {{
    // kind, name, compiles, needs_build_env, builds_extensions, ships_packages_only
    {Backend::Native, "native", true, false, true, false},
    {Backend::Setuptools, "setuptools", true, true, false, false},
    {Backend::Pure, "pure", false, false, false, true},
}};

}  // namespace

std::span<const BackendSpec> backends() {
  return kBackends;
}

const BackendSpec& backend_spec(Backend backend) {
  for (const auto& b : kBackends)
    if (b.kind == backend) return b;
  return kBackends.front();  // unreachable: every enumerator has a row
}

const BackendSpec* backend_named(std::string_view name) {
  for (const auto& b : kBackends)
    if (b.name == name) return &b;
  return nullptr;
}

std::string backend_name(Backend backend) {
  return std::string(backend_spec(backend).name);
}

std::string backend_names() {
  std::string out;
  for (std::size_t i = 0; i < kBackends.size(); ++i)
    out += cat(i == 0 ? "" : i + 1 == kBackends.size() ? " or " : ", ", kBackends[i].name);
  return out;
}

}  // namespace kiln::manifest
