// A private view of /tmp for this process and its children (a mount namespace of its own).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln {

// The one path every build root is seen at: /tmp/kiln-build/<name> inside kiln's namespace
// (cache/build_root.h). Fixed, since it ends up in the wheels' bytes (torch headers'
// __FILE__ strings); validate's ELF check knows it as a build machine's path.
inline constexpr std::string_view kBuildRootsPath = "/tmp/kiln-build";

// Moves this process into a mount namespace of its own (when not root, inside a user namespace
// that maps this user to root, as `unshare --user --map-root-user --mount` does), in which /tmp is
// a fresh tmpfs holding every entry the real /tmp held at this call (bound back in: their
// contents are the real ones), and /tmp/<name> is `source` (bound). Nothing changes outside this
// process and its children: nothing is written to the real /tmp, and a path there that someone
// planted (a link, a directory of another user) is not even seen. The working directory is
// entered again by its path. Must be called while the process has a single thread; an error
// (user namespaces not allowed, no mount rights, too many entries in /tmp) changes nothing.
Expected<void> enter_private_tmp(const std::string& name, const std::filesystem::path& source);

}  // namespace kiln
