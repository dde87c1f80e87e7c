#include "rebuild/host.h"

#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::rebuild {

using json = nlohmann::json;

namespace {

// The first line where two texts differ ("Build cuda_13.0.r13.0/compiler.36424714_0" of nvcc's
// version texts), each side's.
std::pair<std::string, std::string> differing_lines(std::string_view a, std::string_view b) {
  auto la = split(a, "\n", /*skip_empty=*/false), lb = split(b, "\n", /*skip_empty=*/false);
  for (std::size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
    std::string x = i < la.size() ? la[i] : "", y = i < lb.size() ? lb[i] : "";
    if (x != y) return {std::string(trim(x)), std::string(trim(y))};
  }
  return {std::string(a), std::string(b)};
}

std::string shown(const json& v) {
  if (v.is_null()) return "(absent)";
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void diff(const json& a, const json& b, const std::string& path, std::vector<HostDifference>& out) {
  if (a == b) return;
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items())
      diff(value, b.contains(key) ? b[key] : json(), cat(path, ".", key), out);
    for (const auto& [key, value] : b.items())
      if (!a.contains(key)) diff(json(), value, cat(path, ".", key), out);
    return;
  }
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (std::size_t i = 0; i < a.size(); ++i) diff(a[i], b[i], cat(path, "[", i, "]"), out);
    return;
  }
  if (a.is_string() && b.is_string()) {
    auto [x, y] = differing_lines(a.get<std::string>(), b.get<std::string>());
    out.push_back({path, x, y});
    return;
  }
  out.push_back({path, shown(a), shown(b)});
}

}  // namespace

std::vector<HostDifference> input_differences(const json& recorded, const json& here,
                                              std::size_t limit) {
  std::vector<HostDifference> all;
  diff(recorded, here, "inputs", all);
  if (all.size() > limit) {
    std::size_t more = all.size() - limit;
    all.resize(limit);
    all.push_back({cat("… and ", more, " more inputs"), "", ""});
  }
  return all;
}

std::vector<HostDifference> host_differences(const wheel::Provenance& p,
                                             const toolchain::Toolchain& tc) {
  std::vector<HostDifference> out;
  if (!p.tools) return out;
  const wheel::BuiltTools& t = *p.tools;
  auto compare = [&](const std::string& input, const std::string& recorded,
                     const std::string& here) {
    if (recorded.empty() || recorded == here) return;
    auto [x, y] = differing_lines(recorded, here);
    out.push_back({input, x, y});
  };
  compare("ld --version", t.ld, tc.host.ld);
  compare("glibc", t.glibc, tc.host.glibc);
  compare("CUDA include/ (tree sha256)", t.cuda_include, tc.host.cuda_include);
  return out;
}

std::string describe(const HostDifference& d) {
  if (d.recorded.empty() && d.here.empty()) return d.input;
  return cat(d.input, ": the wheel's '", terminal_field(d.recorded, 200), "', here '",
             terminal_field(d.here, 200), "'");
}

}  // namespace kiln::rebuild
