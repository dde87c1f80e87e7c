#include "init/requirements.h"

#include <algorithm>

#include "core/strings.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"
#include "wheel/metadata.h"

namespace kiln::init {

namespace {

bool is_name_char(char c) {
  return is_ascii_alnum(c) || c == '-' || c == '_' || c == '.';
}

// "[a, b]" after a name.
bool parse_extras(Scanner& s, std::vector<std::string>& extras) {
  if (!s.skip('[')) return true;
  while (true) {
    s.skip_spaces();
    std::string_view extra = s.take_while(is_name_char);
    if (extra.empty()) return false;
    extras.emplace_back(extra);
    s.skip_spaces();
    if (s.skip(']')) return true;
    if (!s.skip(',')) return false;
  }
}

// "X.Y" of "X.Y[.Z…]", "" when it does not start that way.
std::string major_minor(std::string_view version) {
  Scanner s(version);
  std::string_view major = s.take_while(is_ascii_digit);
  if (major.empty() || major.size() > 3 || !s.skip('.')) return {};
  std::string_view minor = s.take_while(is_ascii_digit);
  if (minor.empty() || minor.size() > 3) return {};
  return cat(major, ".", minor);
}

bool applies_to_linux(const Requirement& r) {
  return r.marker.empty() || r.marker.find("Linux") != std::string::npos ||
         r.marker.find("linux") != std::string::npos;
}

}  // namespace

std::string Requirement::marker_extra() const {
  for (std::string_view quote : {"'", "\""}) {
    for (std::string_view eq : {"extra == ", "extra=="}) {
      std::string needle = cat(eq, quote);
      std::size_t at = marker.find(needle);
      if (at == std::string::npos) continue;
      std::size_t start = at + needle.size();
      std::size_t end = marker.find(quote, start);
      if (end != std::string::npos) return marker.substr(start, end - start);
    }
  }
  return {};
}

std::optional<Requirement> parse_requirement(std::string_view text) {
  Requirement r;
  std::size_t semi = text.find(';');
  if (semi != std::string_view::npos) r.marker = std::string(trim(text.substr(semi + 1)));
  Scanner s(trim(text.substr(0, semi)));
  r.name = std::string(s.take_while(is_name_char));
  if (r.name.empty()) return std::nullopt;
  s.skip_spaces();
  if (!parse_extras(s, r.extras)) return std::nullopt;
  s.skip_spaces();
  r.specifier = std::string(trim(s.rest()));
  if (r.specifier.starts_with("(") && r.specifier.ends_with(")"))
    r.specifier =
        std::string(trim(std::string_view(r.specifier).substr(1, r.specifier.size() - 2)));
  Scanner spec(r.specifier);
  std::string op = spec.skip("===") ? "===" : spec.skip("==") ? "==" : "";
  spec.skip_spaces();
  std::string_view version =
      spec.take_while([](char c) { return is_ascii_alnum(c) || c == '.' || c == '*' || c == '+'; });
  spec.skip_spaces();
  if (!op.empty() && !version.empty() && spec.done()) {
    r.op = op;
    r.version = std::string(version);
  }
  return r;
}

Expected<void> check_requires_dist(std::string_view metadata, std::string_view where) {
  for (const std::string& line : wheel::parse_metadata(metadata).all("Requires-Dist")) {
    std::string bad = control_character(line);
    if (bad.empty()) continue;
    return Error::failed(cat(where, ": the METADATA's Requires-Dist '", printable_excerpt(line, 60),
                             "' holds a control character (", bad,
                             "); kiln does not read metadata it cannot write down as it is"));
  }
  return {};
}

std::optional<TorchCuda> cuda_from_metadata(std::string_view metadata) {
  std::optional<TorchCuda> runtime;
  for (const std::string& line : wheel::parse_metadata(metadata).all("Requires-Dist")) {
    auto r = parse_requirement(line);
    if (!r || r->op.empty() || !applies_to_linux(*r) || !r->marker_extra().empty()) continue;
    std::string name = packaging::normalize_name(r->name);
    std::string version = major_minor(r->version);
    if (version.empty()) continue;
    if (name == "cuda-toolkit")
      return TorchCuda{version, r->version.ends_with(".*") ? "" : r->version, line};
    if ((name == "nvidia-cuda-runtime" || name.starts_with("nvidia-cuda-runtime-cu")) && !runtime)
      runtime = TorchCuda{version, "", line};
  }
  return runtime;
}

std::vector<Component> toolkit_components(std::string_view metadata) {
  std::vector<Component> out;
  for (const std::string& line : wheel::parse_metadata(metadata).all("Requires-Dist")) {
    auto r = parse_requirement(line);
    if (!r || r->op != "==" || !applies_to_linux(*r)) continue;
    std::string extra = r->marker_extra();
    if (extra != "nvcc" && extra != "crt" && extra != "nvvm" && extra != "cudart" &&
        extra != "cccl")
      continue;
    Component c{packaging::normalize_name(r->name), r->version};
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  std::sort(out.begin(), out.end(),
            [](const Component& a, const Component& b) { return a.project < b.project; });
  return out;
}

bool version_matches(std::string_view version, std::string_view spec) {
  auto set = packaging::SpecifierSet::parse(cat("==", spec));
  auto v = packaging::Version::parse(version);
  if (!set || set->specifiers().size() != 1 || !v) return version == spec;
  return set->specifiers()[0].matches(*v, version);
}

}  // namespace kiln::init
