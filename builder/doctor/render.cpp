// The human report of `kiln doctor`: doctor.py's rows, kiln's static verdicts, the fast path lines
// and the next commands, each printed from its words (shell_command), never from doctor.py's text.
#include <algorithm>
#include <optional>

#include "core/strings.h"
#include "core/terminal.h"
#include "doctor/doctor.h"
#include "doctor/report.h"

namespace kiln::doctor {

namespace {

// One line of verdicts per checked distribution: "gpu-target sm_90 pass, torch-abi fail: …".
std::string verdicts(const nlohmann::json& item) {
  if (item.contains("error")) return cat("not checked: ", str(item, "error"));
  std::vector<std::string> parts;
  for (const auto& c : member(item, "checks")) {
    std::string id = str(c, "id"), verdict = str(c, "verdict");
    if (id == "gpu-code" || (id == "installed" && verdict == "pass")) continue;
    std::string head = str(c, "gpu").empty() ? id : cat(id, " ", str(c, "gpu"));
    parts.push_back(verdict == "pass" || verdict == "skip"
                        ? cat(head, " ", verdict)
                        : cat(head, " ", verdict, ": ", str(c, "message")));
  }
  return join(parts, ", ");
}

// "next:" and the commands that build and install what the missing paths need, each printed from
// its words (doctor.py's argv lists: a torch version or a --server value there may hold anything,
// and only shell_command's quoting makes the line run exactly those words).
// `note` (doctor.py's line of why: which target of the server, or why none) comes first as a
// comment, one line of printable text, so a pasted block runs nothing of it.
std::string next_commands(const nlohmann::json& argvs, const std::string& note) {
  std::string out = "next:\n";
  if (!note.empty()) out += cat("  # ", terminal_text(note, /*keep_newlines=*/false), "\n");
  std::size_t left_out = 0;
  for (const auto& argv : argvs.is_array() ? argvs : nlohmann::json::array()) {
    std::vector<std::string> words;
    for (const auto& w : argv.is_array() ? argv : nlohmann::json::array())
      if (w.is_string()) words.push_back(w.get<std::string>());
    std::optional<std::string> line;
    if (argv.is_array() && !words.empty() && words.size() == argv.size())
      line = shell_command(words);
    if (line)
      out += cat("  ", *line, "\n");
    else
      ++left_out;
  }
  if (left_out)
    out +=
        cat("  (", left_out, left_out == 1 ? " command" : " commands",
            " of the report left out: not a list of words, or a word with a control character)\n");
  return out;
}

}  // namespace

std::string render_text(const nlohmann::json& report) {
  // The report comes from the machine that ran doctor.py: its strings are shown one line each.
  auto field = [](const std::string& text) { return terminal_text(text, /*keep_newlines=*/false); };
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& row : member(report, "summary"))
    if (row.is_array() && row.size() == 2 && row[0].is_string() && row[1].is_string())
      rows.emplace_back(field(row[0].get<std::string>()), field(row[1].get<std::string>()));
  const nlohmann::json& kiln = member(report, "kiln");
  for (const auto& item : member(kiln, "installed"))
    rows.emplace_back(field(cat(str(item, "name"), " (static)")), field(verdicts(item)));
  std::size_t width = 0;
  for (const auto& [label, text] : rows) width = std::max(width, label.size());
  std::string out;
  for (const auto& [label, text] : rows)
    out += cat(label, std::string(width - label.size(), ' '), "  ", text, "\n");
  // kiln's section, when there, decides: it adds the static verdicts to doctor.py's reasons.
  auto path = [&](const char* key) -> const nlohmann::json& {
    return kiln.is_object() && kiln.contains(key) ? member(kiln, key) : member(report, key);
  };
  auto line = [&](const char* label, const nlohmann::json& p) {
    if (flag(p, "active")) return cat(label, ": active\n");
    std::vector<std::string> reasons;
    for (const auto& r : path_reasons(p)) reasons.push_back(field(r));
    return cat(label, ": missing (", join(reasons, "; "), ")\n");
  };
  std::vector<std::string> missing;  // the paths' names, as doctor.py's commands_for keys them
  out += line("fast path", path("fast_path"));
  if (!flag(path("fast_path"), "active")) missing.push_back("fast_path");
  if (path("mamba2_fast_path").is_object()) {
    out += line("Mamba-2 fast path", path("mamba2_fast_path"));
    if (!flag(path("mamba2_fast_path"), "active")) missing.push_back("mamba2_fast_path");
  }
  if (missing.empty()) return out;
  // The commands for exactly the missing paths; an older doctor.py has the Gated DeltaNet's only.
  const nlohmann::json& next = member(report, "next");
  const nlohmann::json& argv_for = member(next, "argv_for");
  std::string key = join(missing, "+");
  if (!member(argv_for, key.c_str()).is_array()) key = "fast_path";
  return out +
         next_commands(member(argv_for, key.c_str()), str(member(next, "notes_for"), key.c_str()));
}

}  // namespace kiln::doctor
