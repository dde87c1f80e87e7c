// kiln help [COMMAND [SUBCOMMAND]]: a command's help, as `kiln COMMAND --help` prints it, in
// kiln's own format (help_formatter). The completion scripts are made in completion.cpp.
#include "cli/help.h"

#include <CLI/CLI.hpp>

#include <iostream>
#include <set>

#include "cli/context.h"
#include "core/error.h"
#include "core/strings.h"

namespace kiln::cli {

std::vector<const CLI::App*> visible_subcommands(const CLI::App& app) {
  return app.get_subcommands(
      [](const CLI::App* a) { return !a->get_name().empty() && !a->get_group().empty(); });
}

namespace {

// The names of `options` as help shows them: "--torch", "packages".
std::string option_list(const std::vector<CLI::Option*>& options) {
  std::vector<std::string> names;
  for (const CLI::Option* o : options) names.push_back(o->get_name());
  return join(names, ", ");
}

class Formatter : public CLI::Formatter {
 public:
  std::string make_help(const CLI::App* app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub) return make_expanded(app);
    return cat(make_description(app), make_usage(app, name), make_positionals(app),
               make_groups(app, mode), global_options(app), make_subcommands(app, mode), "\n",
               make_footer(app));
  }

  // The value's type: "TARGET", "SIZE"; a check's own words in place of CLI11's generic type
  // ("INT:INT>=0" -> "INT>=0", "TEXT:{a,b}" -> "{a,b}", "MODE:{a,b}" -> "{a,b}").
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_expected_max() == 0) return "";  // a flag
    std::vector<std::string> parts = split(opt->get_type_name(), ":");
    std::string out = parts.size() > 1
                          ? join(std::vector<std::string>(parts.begin() + 1, parts.end()), " ")
                      : parts.empty() ? ""
                                      : parts[0];
    if (!out.empty()) out = " " + out;
    if (opt->get_expected_max() >= CLI::detail::expected_max_vector_size) out += " ...";
    if (opt->get_required()) out += " (required)";
    return out;
  }

  // The description, then what the option needs or rules out when it does not say so itself.
  std::string make_option_desc(const CLI::Option* opt) const override {
    std::string desc = opt->get_description();
    auto unsaid = [&desc](const std::set<CLI::Option*>& options) {
      std::vector<CLI::Option*> out;
      for (CLI::Option* o : options)
        if (desc.find(o->get_name()) == std::string::npos) out.push_back(o);
      return out;
    };
    if (auto needs = unsaid(opt->get_needs()); !needs.empty())
      desc += cat(" (with ", option_list(needs), ")");
    if (auto excludes = unsaid(opt->get_excludes()); !excludes.empty())
      desc += cat(" (not with ", option_list(excludes), ")");
    return desc;
  }

 private:
  // In a subcommand's help, kiln's own options, which it takes before or after the command.
  std::string global_options(const CLI::App* app) const {
    if (!app->get_parent()) return "";
    const CLI::App* root = app;
    while (root->get_parent()) root = root->get_parent();
    std::vector<const CLI::Option*> options = root->get_options([root](const CLI::Option* o) {
      return o->nonpositional() && o != root->get_help_ptr() && o != root->get_help_all_ptr() &&
             o != root->get_version_ptr();
    });
    if (options.empty()) return "";
    return make_group("Global options (before or after the command)", false, options);
  }
};

}  // namespace

std::shared_ptr<CLI::Formatter> help_formatter() {
  return std::make_shared<Formatter>();
}

std::function<int()> configure_help(CLI::App& sub, Context&) {
  auto words = std::make_shared<std::vector<std::string>>();
  sub.add_option("command", *words, "The command (and subcommand) to explain, e.g. 'cache gc'")
      ->type_name(kCommandValue);
  return [&sub, words] {
    const CLI::App* app = sub.get_parent();
    std::string prefix;  // "kiln cache": what --help's usage line names the command with
    for (const auto& w : *words) {
      std::vector<std::string> names;
      const CLI::App* next = nullptr;
      for (const CLI::App* c : visible_subcommands(*app)) {
        names.push_back(c->get_name());
        if (c->get_name() == w) next = c;
      }
      if (!next) {
        std::string hint = closest_match(w, names);
        raise(Error::bad_input(cat("no command '", printable_excerpt(w, 40), "'",
                                   hint.empty() ? cat(": kiln has ", join(names, ", "))
                                                : cat(" (did you mean '", hint, "'?)"))));
      }
      prefix = prefix.empty() ? app->get_name() : cat(prefix, " ", app->get_name());
      app = next;
    }
    std::cout << app->help(prefix);
    return 0;
  };
}

}  // namespace kiln::cli
