// kiln resolve [PACKAGES…] [--target T]… [--archs SPEC]
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/context.h"
#include "cli/table.h"
#include "resolve/plan.h"

namespace kiln::cli {

std::function<int()> configure_resolve(CLI::App& sub, Context& ctx) {
  struct Options {
    std::vector<std::string> packages, targets;
    std::string archs;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("packages", opts->packages, "NAME or NAME==VERSION (default: every package)");
  sub.add_option("-t,--target", opts->targets, "Target name or file (repeatable; default: default)")
      ->allow_extra_args(false);
  CLI::Option* archs_option =
      sub.add_option("--archs", opts->archs, "Override the targets' archs, e.g. \"9.0;12.0+PTX\"");
  return [&ctx, opts, archs_option] {
    require_archs_value(archs_option, opts->archs);
    auto targets = ctx.targets(opts->targets, opts->archs);
    resolve::Plan plan = resolve::make_plan(ctx.repository(), opts->packages, targets).value();
    if (ctx.json) {
      nlohmann::json out = {{"targets", nlohmann::json::array()},
                            {"items", nlohmann::json::array()}};
      for (const auto& rt : plan.targets)
        out["targets"].push_back({{"name", rt.target.name},
                                  {"archs", rt.target.archs.canonical()},
                                  {"python_tag", rt.python_tag},
                                  {"toolchain", rt.toolchain}});
      for (const auto& item : plan.items)
        out["items"].push_back({{"package", item.manifest->name},
                                {"version", item.manifest->version},
                                {"backend", manifest::backend_name(item.manifest->backend)},
                                {"target", item.target_name},
                                {"manifest", item.manifest->display_path},
                                {"key", item.key},
                                {"inputs", item.inputs}});
      std::cout << out.dump(2) << "\n";
      return 0;
    }
    Table table({"PACKAGE", "VERSION", "BACKEND", "TARGET", "ARCHS", "BUILD KEY"});
    for (const auto& item : plan.items) {
      std::string archs = "-";
      if (item.manifest->backend != manifest::Backend::Pure)
        for (const auto& rt : plan.targets)
          if (rt.target.name == item.target_name) archs = rt.target.archs.canonical();
      table.add({item.manifest->name, item.manifest->version,
                 manifest::backend_name(item.manifest->backend), item.target_name, archs,
                 item.key});
    }
    std::cout << table.render();
    return 0;
  };
}

}  // namespace kiln::cli
