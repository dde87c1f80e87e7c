// What help and the completion scripts show of the command table.
#pragma once

#include <memory>
#include <vector>

namespace CLI {
class App;
class Formatter;
}  // namespace CLI

namespace kiln::cli {

// The subcommands of `app` a user is shown: named, and not hidden (`kiln __complete`).
std::vector<const CLI::App*> visible_subcommands(const CLI::App& app);

// How kiln's help reads: each option's value by its type name (no CLI11 "Excludes:"/"Needs:"
// badges: those become "(with …)"/"(not with …)" in the description), and a subcommand's help
// lists the global options too.
std::shared_ptr<CLI::Formatter> help_formatter();

}  // namespace kiln::cli
