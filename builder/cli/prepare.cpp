// kiln prepare PKG -o DIR: fetch, unpack and patch a package's sources into DIR.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cache/store.h"
#include "cli/context.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "manifest/manifest.h"
#include "pipeline/sources.h"

namespace kiln::cli {

std::function<int()> configure_prepare(CLI::App& sub, Context& ctx) {
  struct Options {
    std::string package, output, index_url;
    std::vector<std::string> targets;
    bool offline = false;
  };
  auto opts = std::make_shared<Options>();
  sub.add_option("package", opts->package,
                 "NAME, NAME==VERSION or NAME with specifiers, e.g. 'NAME~=1.6.0'")
      ->required()
      ->type_name(kPackageValue);
  sub.add_option("-o,--output", opts->output, "Directory to create (must not exist)")->required();
  sub.add_option("-t,--target", opts->targets,
                 "Target (accepted for symmetry with build; sources do not depend on it)")
      ->allow_extra_args(false)
      ->type_name(kTargetValue);
  sub.add_flag("--offline", opts->offline, "Use the download cache only");
  sub.add_option("--index-url", opts->index_url, "Package index (default: pip's configuration)");
  return [&ctx, opts] {
    const manifest::Manifest* m = ctx.repository().select(opts->package).value();
    if (!opts->targets.empty()) ctx.targets(opts->targets, "");  // validated, not otherwise needed
    fs::path dest = absolute_path(opts->output);
    std::error_code ec;
    if (fs::exists(dest, ec))
      raise(Error::bad_input(cat("output directory ", opts->output, " already exists")));
    cache::Store store(ctx.cache_path());
    auto fetching = pipeline::Fetching::create(store, ctx.offline(opts->offline),
                                               ctx.index_url(opts->index_url))
                        .value();
    cache::Staging scratch = store.staging("prepare-").value();
    // Hunks away from their stated line: a patch's author may want to refresh it.
    std::vector<std::string> offsets =
        pipeline::prepare_tree(*m, *fetching, scratch.path() / "work", dest).value().notes;
    for (const auto& note : offsets) log::info(terminal_text(note, /*keep_newlines=*/false));
    // What a build would refuse, said here too (the tree is there to be looked at).
    if (auto missing = manifest::check_tree(*m, dest); !missing)
      log::warn(cat(missing.error().message, "\n", missing.error().detail));
    if (ctx.json) {
      std::cout << nlohmann::json{{"package", m->name},    {"version", m->version},
                                  {"path", dest.string()}, {"patches", m->patches.size()},
                                  {"offsets", offsets},    {"fetches", fetching->downloads()}}
                       .dump(2)
                << "\n";
    } else {
      std::cout << dest.string() << "\n";
      log::info(cat("prepared ", m->name, " ", m->version, " with ", m->patches.size(),
                    " patches (", fetching->downloads(), " downloaded)"));
    }
    return 0;
  };
}

}  // namespace kiln::cli
