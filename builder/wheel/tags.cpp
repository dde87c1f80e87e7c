#include "wheel/tags.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "core/strings.h"
#include "manifest/target.h"

namespace kiln::wheel {

namespace {

// From auditwheel's manylinux-policy.json (x86_64): the newest symbol version of each family
// that a policy allows.
struct Policy {
  int glibc_minor;
  const char* glibc;
  const char* glibcxx;
  const char* cxxabi;
  const char* gcc;
};
constexpr std::array<Policy, 15> kPolicies = {{
    {5, "2.5", "3.4.8", "1.3.1", "4.2.0"},
    {12, "2.12", "3.4.13", "1.3.3", "4.3.0"},
    {17, "2.17", "3.4.19", "1.3.7", "4.8.0"},
    {24, "2.24", "3.4.22", "1.3.10", "4.8.0"},
    {26, "2.26", "3.4.22", "1.3.10", "4.8.0"},
    {27, "2.27", "3.4.24", "1.3.11", "7.0.0"},
    {28, "2.28", "3.4.24", "1.3.11", "7.0.0"},
    {31, "2.31", "3.4.28", "1.3.12", "7.0.0"},
    {34, "2.34", "3.4.29", "1.3.13", "7.0.0"},
    {35, "2.35", "3.4.30", "1.3.13", "12.0.0"},
    {36, "2.36", "3.4.30", "1.3.13", "12.0.0"},
    {38, "2.38", "3.4.30", "1.3.13", "12.0.0"},
    {39, "2.39", "3.4.33", "1.3.15", "14.0.0"},
    {40, "2.40", "3.4.33", "1.3.15", "14.0.0"},
    {41, "2.41", "3.4.33", "1.3.15", "14.0.0"},
}};

std::vector<int> numbers(std::string_view dotted) {
  std::vector<int> out;
  for (const auto& part : split(dotted, ".")) {
    try {
      out.push_back(std::stoi(part));
    } catch (...) {
      out.push_back(0);
    }
  }
  return out;
}

bool version_le(std::string_view a, std::string_view b) {
  return numbers(a) <= numbers(b);
}

// "GLIBCXX_3.4.21" -> ("GLIBCXX", "3.4.21"); other names -> ("", "").
std::pair<std::string, std::string> family(const std::string& name) {
  for (const char* f : {"GLIBCXX_", "GLIBC_", "CXXABI_", "GCC_"}) {
    std::string prefix = f;
    if (name.rfind(prefix, 0) == 0) {
      std::string v = name.substr(prefix.size());
      if (!v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
            return std::isdigit(static_cast<unsigned char>(c)) || c == '.';
          }))
        return {prefix.substr(0, prefix.size() - 1), v};
    }
  }
  return {"", ""};
}

bool covered(const Policy& p, const std::string& fam, const std::string& v) {
  if (fam == "GLIBC") return version_le(v, p.glibc);
  if (fam == "GLIBCXX") return version_le(v, p.glibcxx);
  if (fam == "CXXABI") return version_le(v, p.cxxabi);
  if (fam == "GCC") return version_le(v, p.gcc);
  return true;
}

}  // namespace

int policy_glibc_minor_for(const std::string& version_name) {
  auto [fam, v] = family(version_name);
  if (fam.empty()) return kPolicies.front().glibc_minor;
  for (const auto& p : kPolicies)
    if (covered(p, fam, v)) return p.glibc_minor;
  return -1;
}

Expected<PlatformTag> manylinux_tag(const std::vector<elf::ElfInfo>& files) {
  std::map<std::string, std::string> highest;  // family -> version
  for (const auto& f : files) {
    for (const auto& need : f.version_needs) {
      auto [fam, v] = family(need.version);
      if (fam.empty()) continue;
      auto it = highest.find(fam);
      if (it == highest.end() || !version_le(v, it->second)) highest[fam] = v;
    }
  }
  PlatformTag tag;
  int minor = kPolicies.front().glibc_minor;
  for (const auto& [fam, v] : highest) {
    std::string name = cat(fam, "_", v);
    tag.highest.push_back(name);
    int m = policy_glibc_minor_for(name);
    if (m < 0)
      return Error::failed(
          cat("symbol version ", name, " is newer than every manylinux policy kiln knows"));
    if (m > minor) {
      minor = m;
      tag.limiting = name;
    }
  }
  tag.tag = cat("manylinux_2_", minor, "_x86_64");
  return tag;
}

std::vector<std::string> symbols_above_floor(const std::vector<elf::ElfInfo>& files,
                                             const std::vector<std::string>& names,
                                             int floor_minor) {
  std::set<std::string> out;
  for (std::size_t i = 0; i < files.size(); ++i)
    for (const auto& s : files[i].dynamic_symbols)
      if (!s.defined && !s.version.empty() && policy_glibc_minor_for(s.version) > floor_minor)
        out.insert(cat(s.name, "@", s.version, " (in ", i < names.size() ? names[i] : "?", ")"));
  return {out.begin(), out.end()};
}

Expected<PlatformTag> at_floor(const PlatformTag& needed, int floor_minor,
                               const std::vector<std::string>& symbols) {
  std::string arch;
  const int needs = manifest::manylinux_minor(needed.tag, arch);
  if (needs > floor_minor) {
    std::vector<std::string> shown(symbols.begin(),
                                   symbols.begin() + std::min<std::size_t>(symbols.size(), 5));
    std::string which = shown.empty()
                            ? std::string()
                            : cat(": ", join(shown, ", "),
                                  symbols.size() > shown.size()
                                      ? cat(" and ", symbols.size() - shown.size(), " more")
                                      : std::string());
    return Error::failed(
        cat("the extension modules need ", needed.tag, " (", needed.limiting,
            "), newer than the target's floor manylinux_2_", floor_minor,
            "_x86_64 (its torch's own), so the wheel would not install where that torch does",
            which),
        cat("Keep these symbols out of the build (call something older glibc has, or bind the "
            "symbol to its old version with __asm__(\".symver NAME,NAME@GLIBC_2.2.5\") where "
            "one exists), or raise the target's floor with [target] manylinux = \"2_",
            needs,
            "\".\n`kiln build --keep-build-root` keeps the build tree; `nm -D "
            "--with-symbol-versions` "
            "on its objects shows which one references them."));
  }
  PlatformTag out = needed;
  out.needs = needed.tag;
  out.tag = cat("manylinux_2_", floor_minor, "_x86_64");
  return out;
}

std::string local_label(const std::string& cuda_version, const std::string& torch_version) {
  std::string cuda;
  for (char c : cuda_version)
    if (c != '.') cuda += c;
  std::string base = torch_version.substr(0, torch_version.find('+'));
  auto parts = split(base, ".");
  std::string torch_minor = parts.size() >= 2 ? cat(parts[0], ".", parts[1]) : base;
  return cat("cu", cuda, "torch", torch_minor);
}

}  // namespace kiln::wheel
