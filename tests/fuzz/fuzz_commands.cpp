// The commands kiln prints for a person to paste (kiln serve's and index export's install lines,
// kiln doctor's next steps), driven with hostile values: NUL-separated fields of the input are the
// index URLs, the host, the project names and versions, and doctor.py's words. Every printed line
// must split into exactly the words meant: the oracle is glibc's wordexp (POSIX word expansion
// with command substitution refused, WRDE_NOCMD, and an undefined variable an error,
// WRDE_UNDEF), which an unquoted ;, $, `, |, &, (, ), <, >, a glob character or a word split
// would make fail or differ. A line kiln does not print (a word a terminal would not show as
// itself) is allowed only for such a word.
#include <wordexp.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "core/terminal.h"
#include "doctor/doctor.h"
#include "fuzz.h"
#include "index/commands.h"

using kiln::fuzz::fail;

namespace {

using Words = std::vector<std::string>;

Words expand(const std::string& line) {
  wordexp_t we{};
  int rc = ::wordexp(line.c_str(), &we, WRDE_NOCMD | WRDE_UNDEF);
  if (rc != 0) {
    if (rc == WRDE_NOSPACE) ::wordfree(&we);
    fail(kiln::cat("a printed line does not parse as plain words (wordexp ", rc, "): ", line));
  }
  Words out(we.we_wordv, we.we_wordv + we.we_wordc);
  ::wordfree(&we);
  return out;
}

bool printable(const Words& words) {
  for (const auto& w : words)
    if (w.find('\0') != std::string::npos || kiln::terminal_text(w, false) != w) return false;
  return true;
}

// The line of `words` runs exactly `words`; no line only when a word cannot be shown.
void check_line(const Words& words) {
  auto line = kiln::shell_command(words);
  if (!line) {
    if (printable(words)) fail("a printable command was not printed");
    return;
  }
  if (!printable(words)) fail("a command with an unprintable word was printed");
  if (expand(*line) != words) fail(kiln::cat("a printed line splits into other words: ", *line));
}

// `value` follows `option` in `words`, as one word.
void check_option(const Words& words, const std::string& option, const std::string& value) {
  for (std::size_t i = 0; i + 1 < words.size(); ++i)
    if (words[i] == option && words[i + 1] == value) return;
  fail(kiln::cat(option, " is not followed by its value as one word"));
}

}  // namespace

KILN_FUZZ_TARGET(commands) {
  Words f = kiln::split(kiln::fuzz::text(data, size), std::string_view("\0", 1), false);
  if (f.size() > 24) f.resize(24);
  while (f.size() < 4) f.emplace_back();
  check_line(f);
  if (!printable(f)) return 0;  // the printers below are fed what a terminal shows as it is

  kiln::index::Target target;
  target.name = "t";
  for (std::size_t i = 3; i + 1 < f.size(); i += 2) {
    auto& p = target.projects[f[i]];
    p.name = f[i];
    if (!f[i + 1].empty()) p.versions.push_back(f[i + 1]);
  }
  auto install = kiln::index::install_commands(target, f[0], f[1]);
  for (const Words* w : {&install.pip, &install.uv}) check_line(*w);
  check_option(install.pip, "--index-url", f[0]);
  check_option(install.uv, "--index-url", f[0]);
  if (!f[1].empty()) check_option(install.pip, "--trusted-host", f[1]);
  auto exported = kiln::index::export_commands(target, f[0], f[1], f[2]);
  for (const Words* w : {&exported.uv, &exported.lock, &exported.pip}) check_line(*w);
  check_option(exported.lock, "--generate-hashes", "--index");
  check_option(exported.uv, "--default-index", f[2]);
  check_option(exported.pip, "--extra-index-url", f[2]);

  // kiln doctor prints doctor.py's argv lists, one line each after "next:".
  nlohmann::json argv = f;
  nlohmann::json report = {{"fast_path", {{"active", false}, {"reasons", {"r"}}}},
                           {"next", {{"argv_for", {{"fast_path", {argv, {"kiln", f[0]}}}}}}}};
  std::string text = kiln::doctor::render_text(report);
  auto at = text.find("next:\n");
  if (at == std::string::npos) fail("no next commands");
  Words lines = kiln::split(text.substr(at + 6), "\n", true);
  if (lines.size() != 2) fail(kiln::cat("doctor printed ", lines.size(), " next lines, not 2"));
  if (expand(lines[0].substr(2)) != f) fail("doctor's first command splits into other words");
  if (expand(lines[1].substr(2)) != Words{"kiln", f[0]}) fail("doctor's second command differs");
  return 0;
}
