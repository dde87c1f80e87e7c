// kiln completion bash|zsh|fish: a completion script made from the command table itself, so it
// knows every subcommand and option of this kiln, and what each value is: an option or positional
// declared with a kTargetValue, kPackageValue or kArchsValue type name (cli/context.h) completes
// with what `kiln __complete targets|packages|archs` prints at TAB time (the manifests directory in
// effect: the command line's --manifests and --patches, else KILN_MANIFESTS, the configuration's,
// ./manifests or kiln's own), one checked by CLI::IsMember with its choices, any other value with
// file names; a value that is due is never completed with option names.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <set>

#include "cli/context.h"
#include "cli/help.h"
#include "core/strings.h"
#include "manifest/arch.h"

namespace kiln::cli {

namespace {

// What completes a value: "targets", "packages", "archs" (kiln __complete's lists), "one-of:a,b"
// (fixed choices), "files"; "" for a flag.
std::string value_kind(const CLI::Option& option, const CLI::App& root) {
  if (option.get_expected_max() == 0) return "";    // a flag
  const std::string type = option.get_type_name();  // "TARGET", "TEXT:{bash,zsh,fish}"
  const std::string head = type.substr(0, type.find(':'));
  if (head == kTargetValue) return "targets";
  if (head == kPackageValue) return "packages";
  if (head == kArchsValue) return "archs";
  std::string choices;
  if (head == kCommandValue) {
    std::vector<std::string> names;
    for (const CLI::App* c : visible_subcommands(root)) names.push_back(c->get_name());
    choices = join(names, ",");
  } else if (std::size_t open = type.find(":{"); open != std::string::npos && type.ends_with('}')) {
    choices = type.substr(open + 2, type.size() - open - 3);  // CLI::IsMember's "{a,b,c}"
  }
  bool plain = !choices.empty() && std::all_of(choices.begin(), choices.end(), [](char c) {
    return is_ascii_alnum(c) || c == ',' || c == '-' || c == '_' || c == '.';
  });
  return plain ? "one-of:" + choices : "files";
}

// A candidate the scripts may offer as it is: no character a shell or the line protocol reads.
bool plain_word(const std::string& word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return is_ascii_alnum(c) || c == '-' || c == '_' || c == '.' || c == '+';
  });
}

// The spellings of an option: "--target", "-t".
std::vector<std::string> spellings(const CLI::Option& option) {
  std::vector<std::string> out;
  for (const auto& l : option.get_lnames()) out.push_back("--" + l);
  for (const auto& s : option.get_snames()) out.push_back("-" + s);
  return out;
}

std::vector<const CLI::Option*> options_of(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return o->nonpositional(); });
}

std::vector<const CLI::Option*> positionals_of(const CLI::App& app) {
  return app.get_options([](const CLI::Option* o) { return o->get_positional(); });
}

struct Node {
  std::string path;  // "cache gc"; "" for kiln itself
  const CLI::App* app;
};

// Every command under `app` ("build", "cache gc"), depth first, with its app.
void collect_commands(const CLI::App& app, const std::string& path, std::vector<Node>& out) {
  out.push_back({path, &app});
  for (const CLI::App* c : visible_subcommands(app))
    collect_commands(*c, path.empty() ? c->get_name() : cat(path, " ", c->get_name()), out);
}

std::string node_name(const std::string& path) {
  std::string n = path.empty() ? "kiln" : "kiln_" + path;
  for (char& c : n)
    if (!is_ascii_alnum(c)) c = '_';
  return n;
}

std::string child_path(const std::string& path, const std::string& name) {
  return path.empty() ? name : cat(path, " ", name);
}

// The part of the bash script made from the command table: for each command, its subcommands and
// options (_kiln_node), the commands after it (_kiln_step), what each option's value is there,
// its own options before those of the commands above it, which it takes too (_kiln_value), and
// what each positional is (_kiln_positional).
std::string bash_tables(const CLI::App& root) {
  std::vector<Node> nodes;
  collect_commands(root, "", nodes);
  std::string node_cases, steps, values, positionals;
  for (const Node& n : nodes) {
    std::vector<std::string> commands, options;
    for (const CLI::App* c : visible_subcommands(*n.app)) {
      commands.push_back(c->get_name());
      steps += cat("    \"", node_name(n.path), " ", c->get_name(),
                   "\") next=", node_name(child_path(n.path, c->get_name())), " ;;\n");
    }
    std::set<std::string> seen;
    for (const CLI::App* a = n.app; a; a = a->get_parent())
      for (const CLI::Option* o : options_of(*a))
        for (const auto& s : spellings(*o))
          if (seen.insert(s).second) options.push_back(s);
    node_cases += cat("    ", node_name(n.path), ") commands=\"", join(commands, " "),
                      "\" options=\"", join(options, " "), "\" ;;\n");
    std::vector<std::string> cases;
    std::vector<const CLI::Option*> pos = positionals_of(*n.app);
    for (std::size_t i = 0; i < pos.size(); ++i) {
      bool many = i + 1 == pos.size() && pos[i]->get_expected_max() > 1;
      cases.push_back(
          cat(many ? "*" : std::to_string(i), ") REPLY='", value_kind(*pos[i], root), "' ;;"));
    }
    if (!cases.empty())
      positionals +=
          cat("    ", node_name(n.path), ") case $2 in ", join(cases, " "), " esac ;;\n");
  }
  // Descendants before their ancestors, so that a command's own option comes first.
  for (auto n = nodes.rbegin(); n != nodes.rend(); ++n)
    for (const CLI::Option* o : options_of(*n->app)) {
      std::string kind = value_kind(*o, root);
      if (kind.empty()) continue;
      std::vector<std::string> patterns;
      for (const auto& s : spellings(*o)) {
        patterns.push_back(cat("\"", node_name(n->path), " ", s, "\""));
        patterns.push_back(cat("\"", node_name(n->path), "_\"*\" ", s, "\""));
      }
      values += cat("    ", join(patterns, "|"), ") REPLY='", kind, "' ;;\n");
    }
  return cat("_kiln_node() {  # COMMAND: its subcommands and options\n", "  case $1 in\n",
             node_cases, "  esac\n}\n",
             "_kiln_step() {  # COMMAND WORD: the command WORD leads to, if any (next)\n",
             "  case \"$1 $2\" in\n", steps, "  esac\n}\n",
             "_kiln_value() {  # COMMAND OPTION: what the option's value is (\"\": a flag)\n",
             "  REPLY=\n  case \"$1 $2\" in\n", values, "  esac\n}\n",
             "_kiln_positional() {  # COMMAND N: what its positional N (from 0) is\n",
             "  REPLY=\n  case $1 in\n", positionals, "  esac\n}\n");
}

// bash (and zsh through bashcompinit). Names from `kiln __complete` are read line by line and
// matched as text, never through compgen -W, which would expand them.
constexpr const char* kBashFunctions = R"(_kiln_values() {  # KIND CURRENT PREFIX
  local kind=$1 cur=$2 pre=$3 list w
  COMPREPLY=()
  if [[ $kind == files ]]; then
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
    return 0
  fi
  if [[ $kind == one-of:* ]]; then
    list=${kind#one-of:}
    COMPREPLY=($(compgen -P "$pre" -W "${list//,/ }" -- "$cur"))
    return 0
  fi
  if [[ $kind == archs ]]; then  # the last arch of a list: "9.0;12.0a,1"
    w=${cur##*[;,]}
    pre=$pre${cur%"$w"}
    cur=$w
  fi
  if [[ $kind != targets || $cur != */* ]]; then
    list=$("$kiln" "${globals[@]}" __complete "$kind" 2>/dev/null)
    while IFS= read -r w; do
      [[ -n $w && $w == "$cur"* ]] && COMPREPLY+=("$pre$w")
    done <<<"$list"
  fi
  if [[ $kind == targets && ${#COMPREPLY[@]} -eq 0 ]]; then  # a target file
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}
_kiln_complete() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev= node=kiln next opt= pre= kind= n=0 i w
  local commands options REPLY kiln=${COMP_WORDS[0]}
  local -a globals=()
  kiln=${kiln/#\~/$HOME}
  ((COMP_CWORD > 1)) && prev=${COMP_WORDS[COMP_CWORD-1]}
  for ((i = 1; i < COMP_CWORD; i++)); do
    w=${COMP_WORDS[i]}
    if [[ $w == -?* ]]; then
      case $w in --manifests=*|--patches=*) globals+=("$w") ;; esac
      _kiln_value "$node" "$w"
      [[ -z $REPLY ]] && continue
      [[ ${COMP_WORDS[i+1]} == = ]] && i=$((i + 1))
      i=$((i + 1))
      if ((i < COMP_CWORD)) && [[ $w == --manifests || $w == --patches ]]; then
        globals+=("$w=${COMP_WORDS[i]/#\~/$HOME}")
      fi
      continue
    fi
    next=
    _kiln_step "$node" "$w"
    if [[ -n $next ]]; then node=$next n=0; else n=$((n + 1)); fi
  done
  # A value is due after an option that takes one: "--target x", "--target=x" (one word, or
  # three where '=' breaks words).
  if [[ $cur == = ]]; then
    opt=$prev cur=
  elif [[ $prev == = ]] && ((COMP_CWORD > 2)); then
    opt=${COMP_WORDS[COMP_CWORD-2]}
  elif [[ $cur == --*=* ]]; then
    opt=${cur%%=*} pre=${cur%%=*}= cur=${cur#*=}
  elif [[ $prev == -?* ]]; then
    opt=$prev
  fi
  if [[ -n $opt ]]; then
    _kiln_value "$node" "$opt"
    kind=$REPLY
  fi
  _kiln_node "$node"
  if [[ -z $kind && $cur != -* ]]; then
    if [[ -n $commands ]]; then
      COMPREPLY=($(compgen -W "$commands" -- "$cur"))
      return 0
    fi
    _kiln_positional "$node" "$n"
    kind=$REPLY
  fi
  if [[ -z $kind ]]; then
    COMPREPLY=($(compgen -W "$options" -- "$cur"))
    return 0
  fi
  _kiln_values "$kind" "$cur" "$pre"
}
complete -F _kiln_complete kiln
)";

std::string bash_script(const CLI::App& root) {
  return cat("# kiln's completion for bash: eval \"$(kiln completion bash)\"\n", bash_tables(root),
             kBashFunctions);
}

std::string fish_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    if (c != '\n') out += c;
  }
  return out + "'";
}

// fish's candidates for a value of this kind ("" for files, fish's own).
std::string fish_candidates(const std::string& kind) {
  if (kind == "files") return "";
  if (kind.starts_with("one-of:")) {
    std::string words = kind.substr(7);
    for (char& c : words)
      if (c == ',') c = ' ';
    return cat(" -a ", fish_quote(words));
  }
  return cat(" -a ", fish_quote(cat("(__kiln_complete ", kind, ")")));
}

constexpr const char* kFishFunction =
    R"(function __kiln_complete --description 'kiln __complete KIND with the command line'\''s --manifests and --patches'
    set -l words (commandline -opc)
    set -l globals
    set -l i 2
    while test $i -le (count $words)
        switch $words[$i]
            case --manifests --patches
                set -l name $words[$i]
                set i (math $i + 1)
                test $i -le (count $words); and set -a globals $name=$words[$i]
            case '--manifests=*' '--patches=*'
                set -a globals $words[$i]
        end
        set i (math $i + 1)
    end
    command $words[1] $globals __complete $argv 2>/dev/null
end
)";

// fish: each subcommand offered where its parent's path was typed, each option of a command once
// the command was (kiln's own everywhere), and each value by its kind.
std::string fish_script(const CLI::App& root) {
  std::vector<Node> nodes;
  collect_commands(root, "", nodes);
  std::string out =
      cat("# kiln's completion for fish: kiln completion fish | source\n", kFishFunction);
  for (const Node& n : nodes) {
    std::string when = n.path.empty() ? "__fish_use_subcommand" : "";
    for (const auto& word : split(n.path, " "))
      when += cat(when.empty() ? "" : "; and ", "__fish_seen_subcommand_from ", word);
    for (const CLI::App* c : visible_subcommands(*n.app))
      out += cat("complete -c kiln -f -n ", fish_quote(when), " -a ", c->get_name(), " -d ",
                 fish_quote(c->get_description()), "\n");
    for (const CLI::Option* o : options_of(*n.app)) {
      out += "complete -c kiln";
      if (!n.path.empty()) out += cat(" -n ", fish_quote(when));
      for (const auto& l : o->get_lnames()) out += " -l " + l;
      for (const auto& s : o->get_snames()) out += " -s " + s;
      // A value: files, a target's name or file, else only the candidates.
      std::string kind = value_kind(*o, root);
      if (!kind.empty())
        out += cat(kind == "files" || kind == "targets" ? " -r" : " -x", fish_candidates(kind));
      out += cat(" -d ", fish_quote(o->get_description()), "\n");
    }
    std::set<std::string> kinds;
    for (const CLI::Option* p : positionals_of(*n.app)) kinds.insert(value_kind(*p, root));
    for (const auto& kind : kinds)  // files stay offered where a positional is one
      if (kind != "files")
        out += cat("complete -c kiln -n ", fish_quote(when), kinds.contains("files") ? "" : " -f",
                   fish_candidates(kind), "\n");
  }
  return out;
}

// What `kiln __complete WHAT` prints: the manifests directory's targets or packages, or the archs
// kiln knows; nothing when the directory does not load.
std::vector<std::string> candidates(Context& ctx, const std::string& what) {
  if (what == "archs") return manifest::known_arch_names();
  if (what != "targets" && what != "packages") return {};
  try {
    auto repo = ctx.load_repository();
    if (!repo) return {};
    if (what == "targets") return repo->target_names();
    std::set<std::string> names;
    for (const auto& m : repo->manifests()) names.insert(m.name);
    for (const auto& b : repo->broken()) names.insert(b.package);
    return {names.begin(), names.end()};
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace

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
                << "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
                << "autoload -U +X bashcompinit && bashcompinit\n"
                << bash_script(root);
    else
      std::cout << bash_script(root);
    return 0;
  };
}

// kiln __complete targets|packages|archs (hidden): the candidates, one a line, for the scripts.
std::function<int()> configure_complete(CLI::App& sub, Context& ctx) {
  sub.group("");  // hidden from help, usage hints and the scripts' commands
  auto what = std::make_shared<std::string>();
  sub.add_option("what", *what, "targets, packages or archs")->required();
  return [&ctx, what] {
    for (const auto& word : candidates(ctx, *what))
      if (plain_word(word)) std::cout << word << "\n";
    return 0;
  };
}

}  // namespace kiln::cli
