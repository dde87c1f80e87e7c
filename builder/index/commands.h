// The commands kiln prints for installing from its index, as argv words (core's shell_command
// makes the line a person pastes): `kiln serve`'s pip and uv commands, and `kiln index export`'s
// for a static tree, which cannot redirect. Every value in them (an index URL a target or the
// user's settings give, a host, a version) is one word, whatever it holds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "index/model.h"

namespace kiln::index {

using Words = std::vector<std::string>;

// "name==version" for each of a target's projects, pinned to its newest served version (a name
// alone when it has none yet).
Words pinned_projects(const Target& target);

// `kiln serve`'s commands: kiln's index alone (kiln sends the rest upstream). `trusted_host`
// ("" for none) is what pip needs to take a plain-http index on another host.
struct InstallCommands {
  Words pip, uv;
};
InstallCommands install_commands(const Target& target, std::string_view index_url,
                                 std::string_view trusted_host);

// What works with a static tree (docs/serve.md, "Static export"): uv with the tree's index first,
// the target's torch index next (when it has one) and the fallback as the default; for pip, the
// hashes locked with uv, then installed from the tree with the fallback as an extra index.
struct ExportCommands {
  Words uv, lock, pip;
};
ExportCommands export_commands(const Target& target, std::string_view tree_index,
                               std::string_view torch_index, std::string_view fallback);

}  // namespace kiln::index
