// kiln help [COMMAND [SUBCOMMAND]]: a command's help, as `kiln COMMAND --help` prints it.
// kiln completion bash|zsh|fish: a completion script made from the command table itself, so it
// knows every subcommand and option of this kiln.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/context.h"
#include "core/error.h"
#include "core/strings.h"

namespace kiln::cli {

namespace {

std::vector<const CLI::App*> children(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); });
}

// The long (else short) spellings of the options of `app`, positionals left out.
std::vector<std::string> option_words(const CLI::App& app) {
  std::vector<std::string> out;
  for (const CLI::Option* o : app.get_options()) {
    if (!o->nonpositional()) continue;
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
    if (o->get_lnames().empty())
      for (const auto& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

// Every command path under `app` ("build", "cache gc"), depth first, with its app.
void walk(const CLI::App& app, const std::string& path,
          std::vector<std::pair<std::string, const CLI::App*>>& out) {
  out.emplace_back(path, &app);
  for (const CLI::App* c : children(app))
    walk(*c, path.empty() ? c->get_name() : cat(path, " ", c->get_name()), out);
}

std::string node_name(const std::string& path) {
  std::string n = path.empty() ? "kiln" : "kiln_" + path;
  for (char& c : n)
    if (!is_ascii_alnum(c)) c = '_';
  return n;
}

// bash (and zsh through bashcompinit): the words after `kiln` choose the node, whose subcommands
// and options are the candidates; a value is completed as a file name.
std::string bash_script(const CLI::App& root) {
  std::vector<std::pair<std::string, const CLI::App*>> nodes;
  walk(root, "", nodes);
  std::string steps, words;
  for (const auto& [path, app] : nodes) {
    std::vector<std::string> w = option_words(*app);
    for (const CLI::App* c : children(*app)) {
      w.insert(w.begin(), c->get_name());
      steps +=
          cat("      \"", node_name(path), " ", c->get_name(),
              "\") node=", node_name(path.empty() ? c->get_name() : cat(path, " ", c->get_name())),
              " ;;\n");
    }
    words += cat("    ", node_name(path), ") words=\"", join(w, " "), "\" ;;\n");
  }
  return cat(
      "# kiln's completion for bash: eval \"$(kiln completion bash)\"\n", "_kiln_complete() {\n",
      "  local cur=${COMP_WORDS[COMP_CWORD]} node=kiln words i\n",
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n", "    case \"$node ${COMP_WORDS[i]}\" in\n",
      steps, "    esac\n", "  done\n", "  case $node in\n", words, "  esac\n",
      "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n",
      "  [[ ${#COMPREPLY[@]} -eq 0 && $cur != -* ]] && COMPREPLY=($(compgen -f -- \"$cur\"))\n",
      "  return 0\n", "}\n", "complete -F _kiln_complete kiln\n");
}

std::string fish_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c != '\n') out += c;
  }
  return out + "'";
}

// fish: each subcommand offered where its parent's path was typed, each option of a command once
// the command was.
std::string fish_script(const CLI::App& root) {
  std::vector<std::pair<std::string, const CLI::App*>> nodes;
  walk(root, "", nodes);
  std::string out = "# kiln's completion for fish: kiln completion fish | source\n";
  for (const auto& [path, app] : nodes) {
    std::string when = path.empty() ? "__fish_use_subcommand" : "";
    for (const auto& word : split(path, " "))
      when += cat(when.empty() ? "" : "; and ", "__fish_seen_subcommand_from ", word);
    for (const CLI::App* c : children(*app))
      out += cat("complete -c kiln -f -n ", fish_quote(when), " -a ", c->get_name(), " -d ",
                 fish_quote(c->get_description()), "\n");
    for (const CLI::Option* o : app->get_options()) {
      if (!o->nonpositional()) continue;
      out += cat("complete -c kiln -n ", fish_quote(when));
      for (const auto& l : o->get_lnames()) out += " -l " + l;
      for (const auto& s : o->get_snames()) out += " -s " + s;
      out += cat(o->get_expected_min() > 0 ? " -r" : "", " -d ", fish_quote(o->get_description()),
                 "\n");
    }
  }
  return out;
}

}  // namespace

std::function<int()> configure_help(CLI::App& sub, Context&) {
  auto words = std::make_shared<std::vector<std::string>>();
  sub.add_option("command", *words, "The command (and subcommand) to explain, e.g. 'cache gc'");
  return [&sub, words] {
    const CLI::App* app = sub.get_parent();
    std::string prefix;  // "kiln cache": what --help's usage line names the command with
    for (const auto& w : *words) {
      std::vector<std::string> names;
      const CLI::App* next = nullptr;
      for (const CLI::App* c : children(*app)) {
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

std::function<int()> configure_completion(CLI::App& sub, Context&) {
  auto shell = std::make_shared<std::string>();
  sub.add_option("shell", *shell, "bash, zsh or fish")
      ->required()
      ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  sub.footer(
      "bash: eval \"$(kiln completion bash)\" in ~/.bashrc; zsh: eval \"$(kiln completion zsh)\" "
      "in ~/.zshrc; fish: kiln completion fish > ~/.config/fish/completions/kiln.fish");
  return [&sub, shell] {
    const CLI::App& root = *sub.get_parent();
    if (*shell == "fish")
      std::cout << fish_script(root);
    else if (*shell == "zsh")
      std::cout << "# kiln's completion for zsh: eval \"$(kiln completion zsh)\"\n"
                << "autoload -U +X bashcompinit && bashcompinit\n"
                << bash_script(root);
    else
      std::cout << bash_script(root);
    return 0;
  };
}

}  // namespace kiln::cli
