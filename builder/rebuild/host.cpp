#include "rebuild/host.h"

#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::rebuild {

namespace {

// The line that tells two versions apart: nvcc's last non-empty one ("Build cuda_13.0…"), the
// first line of the others.
std::string headline(std::string_view text, bool last) {
  std::vector<std::string> lines;
  for (const auto& line : split(text, "\n"))
    if (!trim(line).empty()) lines.emplace_back(trim(line));
  if (lines.empty()) return "";
  return last ? lines.back() : lines.front();
}

}  // namespace

std::vector<HostDifference> host_differences(const wheel::Provenance& p,
                                             const toolchain::Toolchain& tc) {
  std::vector<HostDifference> out;
  if (!p.tools) return out;
  const wheel::BuiltTools& t = *p.tools;
  auto compare = [&](const std::string& input, const std::string& recorded, const std::string& here,
                     bool last_line = false) {
    if (!recorded.empty() && recorded != here)
      out.push_back({input, headline(recorded, last_line), headline(here, last_line)});
  };
  compare("nvcc --version", t.nvcc, tc.cuda.version_text, true);
  compare(cat(tc.cxx.command, " --version"), t.cxx, tc.cxx.version_text);
  compare("ld --version", t.ld, tc.host.ld);
  compare("glibc", t.glibc, tc.host.glibc);
  compare("CUDA include/ (tree sha256)", t.cuda_include, tc.host.cuda_include);
  compare("Python", t.python, tc.python.version);
  if (p.facts.python) compare("Python ABI", p.facts.python->abi_tag, tc.python.abi_tag);
  return out;
}

std::string describe(const HostDifference& d) {
  return cat(d.input, ": the wheel's '", terminal_field(d.recorded, 200), "', here '",
             terminal_field(d.here, 200), "'");
}

}  // namespace kiln::rebuild
