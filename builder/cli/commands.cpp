// The table of subcommands: one file each in this folder.
#include <CLI/CLI.hpp>

#include "cli/context.h"

namespace kiln::cli {

std::function<int()> configure_build(CLI::App& sub, Context& ctx);
std::function<int()> configure_cache(CLI::App& sub, Context& ctx);
std::function<int()> configure_complete(CLI::App& sub, Context& ctx);
std::function<int()> configure_completion(CLI::App& sub, Context& ctx);
std::function<int()> configure_help(CLI::App& sub, Context& ctx);
std::function<int()> configure_doctor(CLI::App& sub, Context& ctx);
std::function<int()> configure_fetch(CLI::App& sub, Context& ctx);
std::function<int()> configure_index(CLI::App& sub, Context& ctx);
std::function<int()> configure_key(CLI::App& sub, Context& ctx);
std::function<int()> configure_prepare(CLI::App& sub, Context& ctx);
std::function<int()> configure_resolve(CLI::App& sub, Context& ctx);
std::function<int()> configure_serve(CLI::App& sub, Context& ctx);
std::function<int()> configure_target(CLI::App& sub, Context& ctx);
std::function<int()> configure_rebuild(CLI::App& sub, Context& ctx);
std::function<int()> configure_validate(CLI::App& sub, Context& ctx);
std::function<int()> configure_verify(CLI::App& sub, Context& ctx);
std::function<int()> configure_wheel(CLI::App& sub, Context& ctx);

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"build", "Build wheels for the plan (cache hit or compile), print their paths",
       configure_build},
      {"cache", "Inspect and maintain the cache: ls, verify, gc", configure_cache},
      {"completion", "A shell completion script: bash, zsh or fish", configure_completion},
      {"doctor", "On a GPU host: what it has and needs for the kernels' fast path; next commands",
       configure_doctor},
      {"fetch", "Download and verify packages' pinned sources; print their paths", configure_fetch},
      {"help", "A command's help: kiln help COMMAND [SUBCOMMAND]", configure_help},
      {"index", "The index as static files: export DIR", configure_index},
      {"key", "The Ed25519 key builds sign with: generate FILE, public FILE", configure_key},
      {"prepare", "Fetch, unpack and patch a package's sources into a directory",
       configure_prepare},
      {"rebuild", "Rebuild a kiln wheel from its kiln.json alone and compare the bytes",
       configure_rebuild},
      {"resolve", "Load manifests and targets; print the plan with each package's build key",
       configure_resolve},
      {"serve", "Serve the cache as a PEP 503/691 index, one sub-index per target",
       configure_serve},
      {"target", "Targets: `init` writes one for a live Python environment", configure_target},
      {"validate", "Check wheels statically: archive, metadata, tags, ELF, torch ABI, GPU archs",
       configure_validate},
      {"verify", "Check wheels' signed attestations (in-toto, SLSA) against a public key",
       configure_verify},
      {"wheel", "Wheels from a directory: pack DIR", configure_wheel},
      // Hidden: the completion scripts' candidates at TAB time (completion.cpp).
      {"__complete", "Completion candidates: targets, packages or archs", configure_complete},
  };
  return table;
}

}  // namespace kiln::cli
