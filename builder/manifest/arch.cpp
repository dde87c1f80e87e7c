#include "manifest/arch.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

constexpr int kKnownArchs[] = {50, 52, 53, 60, 61,  62,  70,  72,  75,  80, 86,
                               87, 88, 89, 90, 100, 101, 103, 110, 120, 121};

// Architectures kiln knows (any CUDA version); a spec naming another number is rejected.
bool is_known_arch(int number) {
  return std::find(std::begin(kKnownArchs), std::end(kKnownArchs), number) != std::end(kKnownArchs);
}

// Why `number` is no arch kiln knows: below every toolkit's oldest, or unknown.
std::string unknown_arch(int number, std::string_view written) {
  if (number < kKnownArchs[0])
    return cat("CUDA architecture ", written, " is older than any CUDA 12 or 13 toolkit builds ",
               "(CUDA 12 builds sm_50 and newer, CUDA 13 sm_75 and newer)");
  return cat("unknown CUDA architecture ", written);
}

// torch.utils.cpp_extension's named sets.
const std::map<std::string, std::string, std::less<>>& named_sets() {
  static const std::map<std::string, std::string, std::less<>> sets = {
      {"maxwell", "5.0;5.2+PTX"}, {"pascal", "6.0;6.1+PTX"},      {"volta", "7.0+PTX"},
      {"turing", "7.5+PTX"},      {"ampere", "8.0;8.6+PTX"},      {"ada", "8.9+PTX"},
      {"hopper", "9.0+PTX"},      {"blackwell", "10.0;12.0+PTX"},
  };
  return sets;
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

// "90a" / "120" / "90f" -> number + suffix.
bool parse_number_suffix(std::string_view text, int& number, char& suffix, std::string& error) {
  suffix = 0;
  if (!text.empty() && (text.back() == 'a' || text.back() == 'f')) {
    suffix = text.back();
    text.remove_suffix(1);
  }
  if (!all_digits(text) || text.size() < 2 || text.size() > 3) {
    error = "expected a two- or three-digit architecture number such as 90 or 120";
    return false;
  }
  number = std::stoi(std::string(text));
  if (!is_known_arch(number)) {
    error = unknown_arch(number, std::to_string(number));
    return false;
  }
  return true;
}

bool parse_token(std::string_view token, std::vector<Arch>& out, std::string& error) {
  std::string lower_token = lower(token);
  if (auto it = named_sets().find(lower_token); it != named_sets().end()) {
    ArchList expanded;
    ArchSpecError inner;
    ArchList::parse(it->second, expanded, inner);
    out.insert(out.end(), expanded.archs().begin(), expanded.archs().end());
    return true;
  }
  Arch arch;
  int number = 0;
  char suffix = 0;
  std::string_view t = token;
  if (t.rfind("sm_", 0) == 0 || t.rfind("compute_", 0) == 0) {
    bool compute = t[0] == 'c';
    t.remove_prefix(compute ? 8 : 3);
    // "sm_120+ptx": kiln's canonical spelling of SASS + PTX.
    bool plus_ptx = false;
    if (std::size_t plus = t.find('+'); plus != std::string_view::npos && !compute) {
      if (lower(t.substr(plus)) != "+ptx") {
        error = "only one '+PTX' may follow an architecture";
        return false;
      }
      plus_ptx = true;
      t = t.substr(0, plus);
    }
    if (!parse_number_suffix(t, number, suffix, error)) return false;
    arch.sass = !compute;
    arch.ptx = compute || plus_ptx;
  } else if (t.find('.') != std::string_view::npos) {
    // TORCH_CUDA_ARCH_LIST: MAJOR.MINOR[a|f][+PTX]
    bool ptx = false;
    std::size_t plus = t.find('+');
    if (plus != std::string_view::npos) {
      std::string_view rest = t.substr(plus);
      if (lower(rest) != "+ptx") {
        error = "only one '+PTX' may follow an architecture";
        return false;
      }
      ptx = true;
      t = t.substr(0, plus);
    }
    std::size_t dot = t.find('.');
    std::string_view major = t.substr(0, dot), minor = t.substr(dot + 1);
    if (!minor.empty() && (minor.back() == 'a' || minor.back() == 'f')) {
      suffix = minor.back();
      minor.remove_suffix(1);
    }
    if (!all_digits(major) || major.size() > 2 || minor.size() != 1 || !all_digits(minor)) {
      error = "expected MAJOR.MINOR such as 9.0 or 12.0";
      return false;
    }
    number = std::stoi(std::string(major)) * 10 + (minor[0] - '0');
    if (!is_known_arch(number)) {
      error = unknown_arch(number, cat(major, ".", minor));
      return false;
    }
    arch.sass = true;
    arch.ptx = ptx;
  } else {
    // CMake: NN[a|f][-real|-virtual]
    std::string_view kind;
    std::size_t dash = t.find('-');
    if (dash != std::string_view::npos) {
      kind = t.substr(dash + 1);
      t = t.substr(0, dash);
      if (kind != "real" && kind != "virtual") {
        error = "a CMake-style architecture ends in -real or -virtual";
        return false;
      }
    }
    if (!parse_number_suffix(t, number, suffix, error)) {
      if (token.find('+') != std::string_view::npos)
        error = "'+PTX' follows MAJOR.MINOR, as in 12.0+PTX";
      return false;
    }
    arch.sass = kind != "virtual";
    arch.ptx = kind != "real";
  }
  arch.major = number / 10;
  arch.minor = number % 10;
  arch.suffix = suffix;
  out.push_back(arch);
  return true;
}

}  // namespace

std::vector<std::string> known_arch_names() {
  std::vector<std::string> out;
  for (int number : kKnownArchs) {
    std::string name = cat(number / 10, ".", number % 10);
    out.push_back(name);
    if (number >= 90) out.push_back(name + "a");
    if (number >= 100) out.push_back(name + "f");
  }
  return out;
}

std::string Arch::sm_name() const {
  return cat("sm_", number(), suffix ? std::string(1, suffix) : std::string());
}
std::string Arch::compute_name() const {
  return cat("compute_", number(), suffix ? std::string(1, suffix) : std::string());
}

bool ArchList::parse(std::string_view spec, ArchList& out, ArchSpecError& error) {
  std::vector<Arch> archs;
  std::size_t i = 0;
  while (i < spec.size()) {
    if (spec[i] == ';' || spec[i] == ' ' || spec[i] == '\t' || spec[i] == ',') {
      ++i;
      continue;
    }
    std::size_t end = spec.find_first_of("; \t,", i);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view token = spec.substr(i, end - i);
    std::string message;
    if (!parse_token(token, archs, message)) {
      error = ArchSpecError{i, cat("bad architecture '", std::string(token), "': ", message)};
      return false;
    }
    i = end;
  }
  if (archs.empty()) {
    error = ArchSpecError{0, "empty architecture list"};
    return false;
  }
  std::sort(archs.begin(), archs.end(), [](const Arch& a, const Arch& b) {
    return std::tie(a.major, a.minor, a.suffix) < std::tie(b.major, b.minor, b.suffix);
  });
  std::vector<Arch> merged;
  for (const Arch& a : archs) {
    if (!merged.empty() && merged.back().number() == a.number() &&
        merged.back().suffix == a.suffix) {
      merged.back().sass |= a.sass;
      merged.back().ptx |= a.ptx;
    } else {
      merged.push_back(a);
    }
  }
  out.archs_ = std::move(merged);
  return true;
}

Expected<ArchList> ArchList::parse(std::string_view spec) {
  ArchList list;
  ArchSpecError error;
  if (!parse(spec, list, error)) return Error::bad_input(error.message);
  return list;
}

std::vector<ArchList> ArchList::each() const {
  std::vector<ArchList> out;
  for (const Arch& a : archs_) {
    ArchList one;
    one.archs_ = {a};
    out.push_back(std::move(one));
  }
  return out;
}

std::string ArchList::canonical() const {
  std::vector<std::string> parts;
  for (const Arch& a : archs_) {
    if (a.sass)
      parts.push_back(a.ptx ? a.sm_name() + "+ptx" : a.sm_name());
    else
      parts.push_back(a.compute_name());
  }
  return join(parts, ";");
}

std::string ArchList::torch_arch_list() const {
  std::vector<std::string> parts;
  for (const Arch& a : archs_) {
    std::string base =
        cat(a.major, ".", a.minor, a.suffix ? std::string(1, a.suffix) : std::string());
    parts.push_back(a.ptx ? base + "+PTX" : base);
  }
  return join(parts, ";");
}

std::string ArchList::slug() const {
  std::vector<std::string> parts;
  std::string sfx;
  for (const Arch& a : archs_) {
    sfx = a.suffix ? std::string(1, a.suffix) : std::string();
    if (a.sass) parts.push_back(cat("sm", a.number(), sfx));
    if (a.ptx) parts.push_back(cat("ptx", a.number(), sfx));
  }
  return join(parts, "-");
}

std::vector<std::string> ArchList::gencode_flags() const {
  std::vector<std::string> flags;
  for (const Arch& a : archs_) {
    if (a.sass) flags.push_back(cat("-gencode=arch=", a.compute_name(), ",code=", a.sm_name()));
    if (a.ptx) flags.push_back(cat("-gencode=arch=", a.compute_name(), ",code=", a.compute_name()));
  }
  return flags;
}

namespace {

// The first CUDA release (major * 100 + minor) that compiles SASS or PTX for an arch, from
// NVIDIA's release notes and `nvcc --list-gpu-code` of each release.
int first_release(int number) {
  static const std::map<int, int> first = {
      {50, 600},  {52, 600},   {53, 600},   {60, 800},   {61, 800},   {62, 800},   {70, 900},
      {72, 1000}, {75, 1000},  {80, 1100},  {86, 1101},  {87, 1104},  {88, 1300},  {89, 1108},
      {90, 1108}, {100, 1208}, {101, 1208}, {103, 1209}, {110, 1300}, {120, 1208}, {121, 1209},
  };
  auto it = first.find(number);
  return it == first.end() ? 0 : it->second;
}

// The oldest suffixed variant's release: 'a' (arch-specific) from 12.0 (sm_90a), 'f' (family) from
// 12.9; never before the arch itself.
int first_release(const Arch& arch) {
  int release = first_release(arch.number());
  if (arch.suffix == 'a') release = std::max(release, 1200);
  if (arch.suffix == 'f') release = std::max(release, 1209);
  return release;
}

std::string release_text(int release) {
  return cat(release / 100, ".", release % 100);
}

}  // namespace

std::string arch_toolkit_problem(const Arch& arch, std::string_view cuda_version) {
  Scanner s(cuda_version);
  std::string_view major_text = s.take_while(is_ascii_digit);
  std::string_view minor_text = s.skip('.') ? s.take_while(is_ascii_digit) : std::string_view{};
  if (major_text.empty() || minor_text.empty() || major_text.size() > 3 || minor_text.size() > 3)
    return cat("cannot tell which archs CUDA '", cuda_version, "' builds");
  int major = std::stoi(std::string(major_text)), minor = std::stoi(std::string(minor_text));
  int release = major * 100 + minor;
  std::string name = arch.sm_name();
  if (int first = first_release(arch); release < first)
    return cat(name, " needs CUDA ", release_text(first), " or newer (this toolkit is ",
               cuda_version, ")");
  if (major >= 13 && arch.number() < 75)
    return cat("CUDA ", cuda_version, " no longer builds ", name,
               " (CUDA 13 builds sm_75 and newer: use a CUDA 12 toolkit)");
  if (major >= 13 && arch.number() == 101)
    return cat("CUDA ", cuda_version, " no longer builds ", name, " (CUDA 13 calls it sm_110)");
  return {};
}

std::string archs_toolkit_problem(const ArchList& archs, std::string_view cuda_version) {
  std::vector<std::string> problems;
  for (const Arch& arch : archs.archs())
    if (std::string p = arch_toolkit_problem(arch, cuda_version); !p.empty()) problems.push_back(p);
  return join(problems, "; ");
}

}  // namespace kiln::manifest
