#include <CLI/CLI.hpp>

#include <cstdlib>
#include <memory>

#include "cli/context.h"
#include "cli/usage.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"
#include "resolve/plan.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif
#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR "."
#endif

namespace kiln::cli {

namespace fs = std::filesystem;

const manifest::Repository& Context::repository() {
  if (!repo_) {
    fs::path dir = manifests_dir;
    std::string display = manifests_dir;
    fs::path patches = absolute_path(dir).parent_path() / "patches";
    repo_ = manifest::Repository::load(absolute_path(dir), patches, display).value();
  }
  return *repo_;
}

std::vector<manifest::Target> Context::targets(const std::vector<std::string>& names,
                                               const std::string& archs) {
  std::vector<std::string> wanted = names.empty() ? std::vector<std::string>{"default"} : names;
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

std::string default_cache() {
  const char* env = std::getenv("KILN_CACHE");
  return env && *env ? env : "cache";
}

std::string default_manifests() {
  const char* env = std::getenv("KILN_MANIFESTS");
  if (env && *env) return env;
  std::error_code ec;
  if (fs::is_directory("manifests", ec)) return "manifests";
  return KILN_SOURCE_DIR "/manifests";
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{"kiln: reproducible wheels for PyTorch CUDA extensions", "kiln"};
  app.set_version_flag("--version", "kiln " KILN_VERSION " (recipe " +
                                        std::to_string(resolve::kRecipeVersion) + ")");
  app.require_subcommand(1);
  app.fallthrough();
  app.set_help_all_flag("--help-all", "Help for every subcommand");
  Context ctx;
  ctx.cache_dir = default_cache();
  ctx.manifests_dir = default_manifests();
  app.add_option("--cache", ctx.cache_dir, "Cache directory (default: $KILN_CACHE or ./cache)");
  app.add_option("--manifests", ctx.manifests_dir,
                 "Manifests directory (default: $KILN_MANIFESTS, ./manifests or kiln's own)");
  app.add_flag("--json", ctx.json, "Machine-readable output on stdout");
  app.add_flag("-v,--verbose", ctx.verbosity, "More output (repeat for more)");

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
  log::set_verbosity(ctx.verbosity);
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
