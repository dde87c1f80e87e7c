// kiln index export DIR [--copy]: the index `kiln serve` serves, as static files.
#include <CLI/CLI.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "index/export.h"
#include "index/scan.h"

namespace kiln::cli {

std::function<int()> configure_index(CLI::App& sub, Context& ctx) {
  struct Options {
    std::string dir;
    bool copy = false;
  };
  auto opts = std::make_shared<Options>();
  sub.require_subcommand(1);
  CLI::App* exp = sub.add_subcommand(
      "export", "Write the index as static files (HTML, JSON, metadata, wheels)");
  exp->add_option("dir", opts->dir,
                  "Output directory (replaced atomically when it is an earlier export)")
      ->required();
  exp->add_flag("--copy", opts->copy,
                "Copy the wheels (default: hard links into the cache where possible)");
  return [&ctx, opts] {
    index::CacheIndex cache_index(ctx.existing_cache());
    auto model = cache_index.current();
    for (const auto& s : model->skipped) log::warn(cat("not exported: ", s));
    index::ExportOptions eo;
    eo.copy = opts->copy;
    index::ExportResult r = index::export_index(*model, opts->dir, eo).value();
    if (ctx.json) {
      std::cout << nlohmann::json{{"dir", absolute_path(opts->dir).string()},
                                  {"targets", r.targets},
                                  {"projects", r.projects},
                                  {"files", r.files},
                                  {"linked", r.linked},
                                  {"copied", r.copied}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << absolute_path(opts->dir).string() << "\n";
      log::info(cat("exported ", r.files, " wheels of ", r.projects, " projects in ", r.targets,
                    " targets (", r.linked, " hard-linked, ", r.copied, " copied)"));
    }
    return 0;
  };
}

}  // namespace kiln::cli
