// What every subcommand shares: the global options and the lazily loaded manifests.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/settings.h"
#include "manifest/repository.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace kiln::cli {

struct Context {
  // Global options, each over its default (cli/settings.h: KILN_*, the user's configuration).
  std::string cache_dir;      // --cache
  std::string manifests_dir;  // --manifests
  std::string patches_dir;    // --patches ("": beside the manifests, else kiln's own)
  bool json = false;          // --json
  int verbosity = 0;          // -v, -vv
  bool quiet = false;         // -q
  Defaults defaults;

  // A command's --index-url when given, else the default ("": pip's or uv's settings).
  std::string index_url(const std::string& given) const;
  // A command's --offline, or the default.
  bool offline(bool given) const;
  // A command's --jobs when given (0: one per core), else the default.
  int jobs(const CLI::Option* option, int given) const;

  // The manifests directory, loaded on first use.
  const manifest::Repository& repository();
  // The same, or why it did not load, for a command that can do without it.
  Expected<const manifest::Repository*> repository_or_error();
  // The manifests directory in effect, loaded afresh and not kept (completion: an error is a
  // value, and no warning follows about its broken manifests).
  Expected<manifest::Repository> load_repository() const;
  // --target values (default: the default targets, else "default"), each with --archs applied.
  std::vector<manifest::Target> targets(const std::vector<std::string>& names,
                                        const std::string& archs);
  std::filesystem::path cache_path() const;
  // The cache a command only reads (cache ls, cache verify, index export): an error when it does
  // not exist, rather than an empty answer about a mistyped path.
  std::filesystem::path existing_cache() const;
  // A warning for each manifest the repository could not load (when it was loaded).
  void report_broken_manifests() const;

 private:
  std::optional<manifest::Repository> repo_;
};

// One subcommand: its name, one line of help, and how to configure it. configure() adds the
// subcommand's options and returns the function that runs it once the command line is parsed.
struct Command {
  const char* name;
  const char* help;
  std::function<int()> (*configure)(CLI::App& sub, Context& ctx);
};

const std::vector<Command>& commands();

// What an option's value (or a positional) is, written as its type name where it is declared:
// help shows it, and the completion scripts offer what `kiln __complete` lists for it.
inline constexpr const char* kTargetValue = "TARGET";    // a target's name (or file)
inline constexpr const char* kPackageValue = "PACKAGE";  // a package, NAME or NAME==VERSION
inline constexpr const char* kArchsValue = "ARCHS";      // an arch spec, e.g. "9.0;12.0+PTX"
inline constexpr const char* kCommandValue = "COMMAND";  // one of kiln's commands

// An --archs option given with an empty value is an error (not "no override").
void require_archs_value(const CLI::Option* option, const std::string& value);

int run(int argc, char** argv);

}  // namespace kiln::cli
