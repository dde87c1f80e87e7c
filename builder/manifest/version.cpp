#include "manifest/version.h"

#include <cctype>
#include <limits>
#include <regex>
#include <tuple>

#include "core/strings.h"

namespace kiln::manifest {

namespace {

const std::regex& version_regex() {
  static const std::regex re(
      R"(^(?:([1-9][0-9]*)!)?((?:0|[1-9][0-9]*)(?:\.(?:0|[1-9][0-9]*))*))"
      R"((?:(a|b|rc)(0|[1-9][0-9]*))?(?:\.post(0|[1-9][0-9]*))?(?:\.dev(0|[1-9][0-9]*))?$)");
  return re;
}

struct ParsedVersion {
  long epoch = 0;
  std::vector<long> release;
  int pre_kind = 3;  // 0 a, 1 b, 2 rc, 3 none
  long pre = 0;
  long post = -1;
  long dev = -1;  // -1: not a dev release
};

ParsedVersion parse_version(std::string_view text) {
  std::match_results<std::string_view::const_iterator> m;
  ParsedVersion v;
  if (!std::regex_match(text.begin(), text.end(), m, version_regex())) return v;
  if (m[1].matched) v.epoch = std::stol(m[1].str());
  for (const auto& part : split(m[2].str(), ".")) v.release.push_back(std::stol(part));
  while (v.release.size() > 1 && v.release.back() == 0) v.release.pop_back();
  if (m[3].matched) {
    std::string kind = m[3].str();
    v.pre_kind = kind == "a" ? 0 : kind == "b" ? 1 : 2;
    v.pre = std::stol(m[4].str());
  }
  if (m[5].matched) v.post = std::stol(m[5].str());
  if (m[6].matched) v.dev = std::stol(m[6].str());
  return v;
}

}  // namespace

bool is_valid_project_name(std::string_view name) {
  static const std::regex re(R"(^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$)");
  return std::regex_match(name.begin(), name.end(), re);
}

std::string normalize_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '-';
      in_run = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_run = false;
    }
  }
  return out;
}

std::string wheel_name(std::string_view name) {
  std::string out = normalize_name(name);
  for (char& c : out)
    if (c == '-') c = '_';
  return out;
}

bool is_valid_version(std::string_view version) {
  return std::regex_match(version.begin(), version.end(), version_regex());
}

int compare_versions(std::string_view a, std::string_view b) {
  ParsedVersion x = parse_version(a), y = parse_version(b);
  std::size_t n = std::max(x.release.size(), y.release.size());
  x.release.resize(n, 0);
  y.release.resize(n, 0);
  // A dev release without pre/post sorts before the pre-releases of its release.
  auto key = [](const ParsedVersion& v) {
    int pre_kind = (v.pre_kind == 3 && v.post < 0 && v.dev >= 0) ? -1 : v.pre_kind;
    long dev = v.dev < 0 ? std::numeric_limits<long>::max() : v.dev;
    return std::make_tuple(v.epoch, v.release, pre_kind, v.pre, v.post, dev);
  };
  auto kx = key(x), ky = key(y);
  return kx < ky ? -1 : (ky < kx ? 1 : 0);
}

bool is_valid_specifier_set(std::string_view specifiers) {
  static const std::regex re(
      R"(^\s*(~=|===|==|!=|<=|>=|<|>)\s*([0-9]+!)?[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\.\*)?\s*$)");
  if (trim(specifiers).empty()) return false;
  for (const auto& part : split(specifiers, ",", /*skip_empty=*/false)) {
    if (!std::regex_match(part, re)) return false;
  }
  return true;
}

bool is_valid_requirement(std::string_view requirement) {
  // name [extras] [specifiers | @ url] [; marker] — the marker is checked only for being present.
  static const std::regex re(
      R"(^\s*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])\s*(\[\s*[A-Za-z0-9._-]+(\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*(\(?\s*([<>=!~@][^;()]*)\)?)?\s*(;\s*\S.*)?$)");
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_match(requirement.begin(), requirement.end(), m, re)) return false;
  std::string spec = std::string(trim(m[5].str()));
  return spec.empty() || spec.rfind("@", 0) == 0 || is_valid_specifier_set(spec);
}

std::string requirement_name(std::string_view requirement) {
  std::string_view t = trim(requirement);
  std::size_t end = 0;
  while (end < t.size() && (std::isalnum(static_cast<unsigned char>(t[end])) || t[end] == '-' ||
                            t[end] == '_' || t[end] == '.'))
    ++end;
  return normalize_name(t.substr(0, end));
}

}  // namespace kiln::manifest
