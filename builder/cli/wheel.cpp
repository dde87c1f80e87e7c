// kiln wheel pack DIR [-o OUTDIR]
// A directory laid out as a wheel's contents, written as a deterministic wheel (how
// scripts/package makes kiln's own wheel).
#include <CLI/CLI.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "core/error.h"
#include "core/fs.h"
#include "wheel/pack.h"

namespace kiln::cli {

namespace {

struct WheelOptions {
  std::string dir;
  std::string out_dir = ".";
};

}  // namespace

std::function<int()> configure_wheel(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<WheelOptions>();
  sub.require_subcommand(1);
  CLI::App* pack = sub.add_subcommand(
      "pack",
      "Write DIR (one <name>-<version>.dist-info with METADATA and WHEEL, and the files) as a "
      "wheel: entries sorted, fixed times, RECORD made afresh; print its path");
  pack->add_option("dir", opts->dir, "The wheel's contents")->required();
  pack->add_option("-o,--out-dir", opts->out_dir, "Where the wheel is written (default: .)");
  return [&ctx, opts] {
    std::filesystem::path wheel =
        wheel::pack_wheel(absolute_path(opts->dir), absolute_path(opts->out_dir)).value();
    if (ctx.json)
      std::cout << nlohmann::json{{"ok", true}, {"wheel", wheel.string()}}.dump() << "\n";
    else
      std::cout << wheel.string() << "\n";
    return 0;
  };
}

}  // namespace kiln::cli
