#include "manifest/toolkit.h"

#include <array>
#include <utility>

namespace kiln::manifest {

namespace {

constexpr std::array<std::pair<ToolkitKind, std::string_view>, 3> kToolkits = {{
    {ToolkitKind::System, "system"},
    {ToolkitKind::Wheels, "wheels"},
    {ToolkitKind::Debian, "debian"},
}};

}  // namespace

std::string_view toolkit_name(ToolkitKind kind) {
  for (const auto& [k, name] : kToolkits)
    if (k == kind) return name;
  return "system";
}

std::optional<ToolkitKind> parse_toolkit_kind(std::string_view name) {
  for (const auto& [k, n] : kToolkits)
    if (n == name) return k;
  return std::nullopt;
}

std::string toolkit_names() {
  return "'system', 'wheels' or 'debian'";
}

}  // namespace kiln::manifest
