// The table of subcommands: one file each in this folder.
#include <CLI/CLI.hpp>

#include "cli/context.h"

namespace kiln::cli {

std::function<int()> configure_resolve(CLI::App& sub, Context& ctx);

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"resolve", "Load manifests and targets; print the plan with each package's build key",
       configure_resolve},
  };
  return table;
}

}  // namespace kiln::cli
