// Where a target's CUDA toolkit comes from, in one table like the backends (manifest/backend.h):
// the toolkit found on the machine, one laid out from pinned NVIDIA wheels, or one from pinned
// Debian packages. Targets, build keys and kiln.json spell them by name; code compares kinds.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kiln::manifest {

enum class ToolkitKind { System, Wheels, Debian };

// "system", "wheels", "debian": a target's `cuda.toolkit`, the build key's and kiln.json's.
std::string_view toolkit_name(ToolkitKind kind);
// The kind a name spells; none for any other text.
std::optional<ToolkitKind> parse_toolkit_kind(std::string_view name);
// Every name, for messages: "'system', 'wheels' or 'debian'".
std::string toolkit_names();

}  // namespace kiln::manifest
