#include <CLI/CLI.hpp>

#include <cstdlib>
#include <memory>

#include "cli/build_commit.h"
#include "cli/context.h"
#include "cli/help.h"
#include "cli/usage.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "resolve/plan.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif

namespace kiln::cli {

namespace fs = std::filesystem;

Expected<manifest::Repository> Context::load_repository() const {
  fs::path dir = manifests_dir;
  fs::path patches = patches_dir.empty() ? default_patches(dir) : absolute_path(patches_dir);
  return manifest::Repository::load(absolute_path(dir), patches, manifests_dir);
}

const manifest::Repository& Context::repository() {
  if (!repo_) repo_ = load_repository().value();
  return *repo_;
}

Expected<const manifest::Repository*> Context::repository_or_error() {
  try {
    return &repository();
  } catch (const KilnError& e) {
    return e.error();
  }
}

std::vector<manifest::Target> Context::targets(const std::vector<std::string>& names,
                                               const std::string& archs) {
  std::vector<std::string> wanted = !names.empty() ? names
                                    : !defaults.targets.empty()
                                        ? defaults.targets
                                        : std::vector<std::string>{"default"};
  std::optional<manifest::ArchList> override_archs;
  if (!archs.empty()) {
    auto parsed = manifest::ArchList::parse(archs);
    if (!parsed) raise(Error::bad_input(cat("--archs: ", parsed.error().message)));
    override_archs = *parsed;
  }
  std::vector<manifest::Target> out;
  for (const auto& name : wanted) {
    manifest::Target t = repository().target(name).value();
    if (override_archs) t = manifest::with_archs(t, *override_archs);
    for (const auto& other : out)
      if (other.name == t.name) raise(Error::bad_input(cat("target '", t.name, "' given twice")));
    out.push_back(std::move(t));
  }
  return out;
}

std::string Context::index_url(const std::string& given) const {
  return given.empty() ? defaults.index_url : given;
}

bool Context::offline(bool given) const {
  return given || defaults.offline;
}

int Context::jobs(const CLI::Option* option, int given) const {
  return option->count() > 0 ? given : defaults.jobs.value_or(0);
}

fs::path Context::cache_path() const {
  return absolute_path(cache_dir);
}

fs::path Context::existing_cache() const {
  fs::path path = cache_path();
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    raise(Error::bad_input(cat("no cache at ", path.string(),
                               " (give --cache DIR or set KILN_CACHE; `kiln build` makes one)")));
  return path;
}

void Context::report_broken_manifests() const {
  if (!repo_) return;
  for (const auto& b : repo_->broken())
    log::warn(cat("ignored a broken manifest: ", b.error.message));
}

void require_archs_value(const CLI::Option* option, const std::string& value) {
  if (option->count() > 0 && trim(value).empty())
    raise(Error::bad_input("--archs: an empty arch list (give the archs, e.g. \"9.0;12.0+PTX\")"));
}

namespace {

void add_global_options(CLI::App& app, Context& ctx) {
  app.add_option("--cache", ctx.cache_dir,
                 "Cache directory (default: $KILN_CACHE, the configuration's, the checkout's "
                 "cache/ when kiln runs from one, else ~/.cache/kiln/cache)")
      ->type_name("DIR");
  app.add_option("--manifests", ctx.manifests_dir,
                 "Manifests directory (default: $KILN_MANIFESTS, the configuration's, "
                 "./manifests or kiln's own)")
      ->type_name("DIR");
  app.add_option("--patches", ctx.patches_dir,
                 "Patches directory, holding <name>/<version>/ (default: $KILN_PATCHES, the "
                 "configuration's, the patches/ beside the manifests directory, else kiln's own)")
      ->type_name("DIR");
  app.add_flag("--json", ctx.json, "Machine-readable output on stdout");
  CLI::Option* verbose =
      app.add_flag("-v,--verbose", ctx.verbosity, "More output (repeat for more)");
  app.add_flag("-q,--quiet", ctx.quiet, "Only warnings and errors on stderr")->excludes(verbose);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"kiln: reproducible wheels for PyTorch CUDA extensions", "kiln"};
  app.formatter(help_formatter());  // before the subcommands, which take it from here
  app.set_version_flag("-V,--version",
                       cat("kiln " KILN_VERSION " (commit ", build_commit(), ", recipe ",
                           std::to_string(resolve::kRecipeVersion), ")"));
  app.require_subcommand(1);
  app.fallthrough();
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  Context ctx;
  ctx.defaults = load_defaults();
  ctx.cache_dir = ctx.defaults.cache;
  ctx.manifests_dir = ctx.defaults.manifests;
  ctx.patches_dir = ctx.defaults.patches;
  add_global_options(app, ctx);

  std::vector<std::pair<CLI::App*, std::function<int()>>> subs;
  for (const auto& command : commands()) {
    CLI::App* sub = app.add_subcommand(command.name, command.help);
    subs.emplace_back(sub, command.configure(*sub, ctx));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    Usage usage = usage_error(app, e, argc, argv);  // --help and --version above; the rest exit 2
    log::error(usage.message);
    log::raw(usage.hint);
    return 2;
  }
  log::set_verbosity(ctx.quiet ? -1 : ctx.verbosity);
  for (auto& [sub, fn] : subs) {
    if (!sub->parsed()) continue;
    // A command that needs a broken manifest fails with its located error; one that does not
    // goes on, and says at the end which manifests it could not read.
    int rc = fn();
    ctx.report_broken_manifests();
    return rc;
  }
  return 2;
}

}  // namespace kiln::cli
