// Check "tags": WHEEL agrees with the file name's tags; each extension module's suffix matches the
// Python/ABI tag; compiled code is not tagged "any"; the manylinux level is not lower than the
// newest GLIBC_/GLIBCXX_/CXXABI_/GCC_ version the ELF files need (auditwheel's rule).
#include <algorithm>
#include <set>

#include "core/strings.h"
#include "validate/checks.h"
#include "wheel/metadata.h"
#include "wheel/tags.h"

namespace kiln::validate {

namespace {

bool is_arch_char(char c) {
  return is_ascii_lower(c) || is_ascii_digit(c) || c == '_';
}

std::string basename(const std::string& path) {
  return path.substr(path.rfind('/') + 1);
}

}  // namespace

// NAME.cpython-3<digits>[t]-<arch>-linux-gnu.so, NAME non-empty and without a line break. Only the
// last ".cpython-3" can start the suffix: the suffix holds no other dot than that of ".so".
std::optional<CpythonSuffix> cpython_suffix(std::string_view file_name) {
  std::size_t at = file_name.rfind(".cpython-3");
  if (at == std::string_view::npos || at == 0 ||
      file_name.substr(0, at).find_first_of("\r\n") != std::string_view::npos)
    return std::nullopt;
  Scanner s(file_name.substr(at + 10));
  CpythonSuffix out;
  out.minor = std::string(s.take_while(is_ascii_digit));
  out.free_threaded = s.skip('t');
  if (out.minor.empty() || !s.skip('-')) return std::nullopt;
  out.arch = std::string(s.take_while(is_arch_char));
  if (out.arch.empty() || !s.skip("-linux-gnu.so") || !s.done()) return std::nullopt;
  return out;
}

bool is_abi3_module(std::string_view file_name) {  // NAME.abi3.so, NAME as above
  const std::string_view suffix = ".abi3.so";
  return file_name.size() > suffix.size() && file_name.ends_with(suffix) &&
         file_name.substr(0, file_name.size() - suffix.size()).find_first_of("\r\n") ==
             std::string_view::npos;
}

namespace {

// WHEEL: a 1.x Wheel-Version, Root-Is-Purelib true or false, and the file name's tags. Returns
// whether the root is purelib.
bool check_wheel_file(const LoadedWheel& w, const std::vector<std::string>& file_tags,
                      Findings& f) {
  auto it = w.texts.find("WHEEL");
  if (it == w.texts.end()) {
    f.fail("no WHEEL file");
    return false;
  }
  wheel::ParsedMetadata wf = wheel::parse_metadata(it->second);
  std::string version = wf.first("Wheel-Version");
  if (version.empty())
    f.fail("WHEEL has no Wheel-Version");
  else if (version.rfind("1.", 0) != 0)
    f.fail(cat("WHEEL says Wheel-Version ", version, "; installers support 1.x"));
  std::string root = wf.first("Root-Is-Purelib");
  if (root != "true" && root != "false")
    f.fail(cat("WHEEL Root-Is-Purelib is '", root, "' (want true or false)"));
  std::vector<std::string> tags = wf.all("Tag");
  std::sort(tags.begin(), tags.end());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  if (tags != file_tags)
    f.fail(cat("WHEEL's tags (", tags.empty() ? std::string("none") : join(tags, ", "),
               ") differ from the file name's (", join(file_tags, ", "), ")"));
  return root == "true";
}

// The extension modules' names against the wheel's tags (and the Python kiln built for, when the
// provenance says): an installer picks the wheel by its tags, the interpreter loads a module by its
// suffix, and the two must agree.
class ModuleTags {
 public:
  ModuleTags(const LoadedWheel& w, Findings& f)
      : w_(w),
        f_(f),
        abis_(w.name.abi_tags.begin(), w.name.abi_tags.end()),
        pythons_(w.name.python_tags.begin(), w.name.python_tags.end()) {}

  // The ABI tag and extension suffix of the Python the provenance says the wheel was built for.
  void check_provenance() {
    if (w_.provenance && w_.provenance->facts.python) {
      const auto& py = *w_.provenance->facts.python;
      want_suffix_ = py.ext_suffix;
      const std::string& abi = py.abi_tag;
      if (!abi.empty() && !abis_.count(abi))
        f_.fail(cat("the wheel was built for ", abi, " (provenance) but is tagged ",
                    join(w_.name.abi_tags, ".")));
    }
  }

  // One extension module: a CPython suffix names the ABI, Python and architecture it needs; an
  // abi3 one needs the abi3 tag; no suffix at all cannot be checked.
  void check_module(const Binary& b) {
    std::string name = basename(b.path);
    if (auto m = cpython_suffix(name)) {
      std::string tag = cat("cp3", m->minor, m->free_threaded ? "t" : "");
      if (!abis_.count(tag))
        f_.fail(cat(b.path, " is built for ", tag, " but the wheel's ABI tag is ",
                    join(w_.name.abi_tags, ".")));
      if (!pythons_.count(cat("cp3", m->minor)))
        f_.fail(cat(b.path, " is built for cp3", m->minor, " but the wheel's Python tag is ",
                    join(w_.name.python_tags, ".")));
      const std::string& arch = m->arch;
      for (const auto& pl : w_.name.platform_tags)
        if (pl != "any" && (pl.size() < arch.size() ||
                            pl.compare(pl.size() - arch.size(), arch.size(), arch) != 0))
          f_.fail(cat(b.path, " is built for ", arch, " but the platform tag is ", pl));
    } else if (is_abi3_module(name)) {
      if (!abis_.count("abi3"))
        f_.fail(cat(b.path, " is a stable-ABI module but the wheel's ABI tag is ",
                    join(w_.name.abi_tags, ".")));
    } else {
      f_.warn(cat(b.path,
                  " has no ABI suffix, so any CPython would load it; its tag cannot be checked"));
    }
    if (!want_suffix_.empty() && name.size() >= want_suffix_.size() &&
        name.compare(name.size() - want_suffix_.size(), want_suffix_.size(), want_suffix_) != 0)
      f_.fail(cat(b.path, " does not end in ", want_suffix_,
                  ", the suffix of the Python it was built for"));
  }

 private:
  const LoadedWheel& w_;
  Findings& f_;
  std::set<std::string> abis_, pythons_;
  std::string want_suffix_;  // from the provenance ("" when it says none)
};

// The glibc minor a symbol version needs: GLIBC_2.N's N, else (GLIBCXX_, CXXABI_, GCC_) the glibc
// minor of the oldest manylinux policy that covers it (-1 when none does).
int required_glibc_minor(const std::string& version) {
  if (version.rfind("GLIBC_2.", 0) == 0) {
    auto parts = split(version.substr(6), ".");
    return parts.size() >= 2 ? std::atoi(parts[1].c_str()) : 0;
  }
  return wheel::policy_glibc_minor_for(version);
}

// auditwheel's rule: each manylinux platform tag promises a glibc at least as new as every
// version the ELF files need. Other Linux tags are warned about (PyPI refuses linux_*).
void check_manylinux(const LoadedWheel& w, Findings& f) {
  std::vector<elf::ElfInfo> infos;
  for (const auto& b : w.binaries) infos.push_back(b.info);
  auto needed = wheel::manylinux_tag(infos);
  if (!needed) {
    f.fail(needed.error().message);
    return;
  }
  f.data()["needs"] = needed->tag;
  f.data()["highest_versions"] = needed->highest;
  for (const auto& pl : w.name.platform_tags) {
    std::string arch;
    int minor = manylinux_minor(pl, arch);
    if (minor < 0) {
      if (pl.rfind("linux_", 0) == 0)
        f.warn(cat("platform tag ", pl,
                   " is not a manylinux tag (PyPI refuses it; the ELF files need ", needed->tag,
                   ")"));
      else if (pl.rfind("musllinux_", 0) != 0 && pl != "any")
        f.warn(cat("platform tag ", pl, " is not a Linux tag kiln knows"));
      continue;
    }
    for (const auto& version : needed->highest) {
      int required = required_glibc_minor(version);
      if (required > minor)
        f.fail(cat("platform tag ", pl, " promises glibc 2.", minor, " but the ELF files need ",
                   version, " (manylinux_2_", required, " or newer)"));
    }
  }
}

}  // namespace

CheckResult check_tags(const LoadedWheel& w) {
  if (!w.zip) return skipped("tags", "the archive is unreadable");
  Findings f("tags");
  std::vector<std::string> file_tags = w.name.tags();
  f.data()["tags"] = file_tags;
  bool purelib = check_wheel_file(w, file_tags, f);

  // Compiled code is platform-specific: its wheel is neither tagged for platform "any" nor purelib.
  bool any_platform = std::find(w.name.platform_tags.begin(), w.name.platform_tags.end(), "any") !=
                      w.name.platform_tags.end();
  if (!w.binaries.empty()) {
    if (any_platform)
      f.fail(
          cat("tagged for platform 'any' but holds compiled code (", w.binaries.front().path, ")"));
    if (purelib)  // installers take it (nvidia-nvtx-cu12 ships so): kiln's rule
      policy(w, f,
             cat("Root-Is-Purelib is true but the wheel holds compiled code (",
                 w.binaries.front().path, ")"));
  }
  ModuleTags module_tags(w, f);
  module_tags.check_provenance();
  std::vector<std::string> modules;
  for (const auto& b : w.binaries) {
    if (!b.extension) continue;
    modules.push_back(b.path);
    module_tags.check_module(b);
  }
  f.data()["extension_modules"] = modules;
  if (!w.binaries.empty()) check_manylinux(w, f);

  std::string summary = cat("tags ", join(file_tags, ", "), " match WHEEL");
  if (!modules.empty())
    summary += cat("; ", modules.size(), " extension module(s) match the ABI tag");
  if (f.data().contains("needs"))
    summary += cat("; the ELF files need ", f.data()["needs"].get<std::string>());
  return f.finish(summary);
}

}  // namespace kiln::validate
