#include "cli/usage.h"

#include <CLI/CLI.hpp>

#include <cstdlib>

#include "cli/help.h"
#include "core/strings.h"

namespace kiln::cli {

namespace {

// What a walk over argv found: the deepest command named, and the first word or option that is
// no command or option there.
struct Walk {
  CLI::App* level = nullptr;
  std::string path;  // "cache" for `kiln cache …`; "" for kiln itself
  std::string unknown_command;
  std::string unknown_option;
  std::string unknown_option_path;  // the command it came after
};

const CLI::Option* find_option(const CLI::App* level, const std::string& name) {
  for (const CLI::App* app = level; app; app = app->get_parent())
    if (const CLI::Option* opt = app->get_option_no_throw(name)) return opt;
  return nullptr;
}

CLI::App* find_command(CLI::App* level, const std::string& name) {
  auto subs = level->get_subcommands([&name](CLI::App* s) { return s->get_name() == name; });
  return subs.empty() ? nullptr : subs.front();
}

// An option word's name: "--jobs=4" -> "--jobs", "-j4" -> "-j".
std::string option_name(const std::string& word) {
  if (word.starts_with("--")) return word.substr(0, word.find('='));
  return word.substr(0, 2);
}

Walk walk(CLI::App& app, int argc, char** argv) {
  Walk w;
  w.level = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--") break;
    if (word.size() > 1 && word[0] == '-') {
      const std::string name = option_name(word);
      const CLI::Option* opt = find_option(w.level, name);
      if (!opt) {
        if (w.unknown_option.empty()) {
          w.unknown_option = name;
          w.unknown_option_path = w.path;
        }
        continue;
      }
      bool inline_value =
          word.find('=') != std::string::npos || (name.size() == 2 && word.size() > 2);
      if (opt->get_expected_max() > 0 && !inline_value) ++i;  // its value
      continue;
    }
    if (CLI::App* sub = find_command(w.level, word)) {
      w.level = sub;
      w.path += (w.path.empty() ? "" : " ") + word;
    } else if (w.unknown_command.empty() && w.level->get_require_subcommand_min() > 0) {
      w.unknown_command = word;
    }
  }
  return w;
}

std::vector<std::string> command_names(const CLI::App* level) {
  std::vector<std::string> out;
  for (const CLI::App* s : visible_subcommands(*level)) out.push_back(s->get_name());
  return out;
}

std::vector<std::string> option_names(const CLI::App* level) {
  std::vector<std::string> out;
  for (const CLI::App* app = level; app; app = app->get_parent())
    for (const CLI::Option* opt : app->get_options()) {
      for (const auto& l : opt->get_lnames()) out.push_back("--" + l);
      for (const auto& s : opt->get_snames()) out.push_back("-" + s);
    }
  return out;
}

std::string did_you_mean(const std::string& prefix, const std::string& best) {
  return best.empty() ? "" : cat(" (did you mean '", prefix, best, "'?)");
}

}  // namespace

Usage usage_error(CLI::App& app, const CLI::Error& error, int argc, char** argv) {
  Walk w = walk(app, argc, argv);
  const std::string command = w.path.empty() ? "kiln" : "kiln " + w.path;
  Usage u;
  u.hint = cat("Run '", command, " --help' for its usage.");
  if (!w.unknown_command.empty()) {
    const std::string prefix = w.path.empty() ? "" : w.path + " ";
    u.message = cat("unknown command '", prefix, w.unknown_command, "'",
                    did_you_mean(prefix, closest_match(w.unknown_command, command_names(w.level))));
  } else if (!w.unknown_option.empty() && w.unknown_option_path != w.path &&
             find_option(w.level, w.unknown_option)) {
    // `kiln --offline prepare …`: an option of the command, written before it.
    u.message = cat("'", w.unknown_option, "' is an option of '", command, "': write it after '",
                    w.path.substr(w.path.rfind(' ') + 1), "'");
  } else if (!w.unknown_option.empty()) {
    u.message = cat("unknown option '", w.unknown_option, "' for '", command, "'",
                    did_you_mean("", closest_match(w.unknown_option, option_names(w.level))));
  } else if (w.level->get_require_subcommand_min() > 0) {
    u.message = cat("'", command, "' needs a command: ", join(command_names(w.level), ", "));
  } else {
    u.message = error.what();
  }
  return u;
}

CLI::Validator non_negative_count() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        char* end = nullptr;
        long n = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || n < 0)
          return cat("'", value, "' is not a count of 0 or more (0: one per core)");
        return "";
      },
      "INT>=0");
}

}  // namespace kiln::cli
