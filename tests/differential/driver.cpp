// kiln's verdicts on many inputs in one process, for tests/e2e/test_validate_differential.py,
// which compares them with the `packaging` library's. Reads JSON lines {"kind": K, "input": S}
// on stdin and writes one line {"ok": true|false, "why": "..."} per input, in order. Kinds:
// version (packaging's Version()), canonical (kiln's canonical public version), specifier
// (SpecifierSet(), blank refused by kiln), marker (Marker()), requirement (Requirement()),
// metadata (Metadata.from_email(validate=True): the standard's rules, which `kiln validate`
// applies with kiln's own on top), wheel_filename (parse_wheel_filename(): the verdict and the
// fields, as "fields"), index_wheel_filename (the same, as the index reads a name), sort (the
// input's lines, which must each be a version, sorted: the order as "order", indexes into the
// lines, a stable sort), same_version ("METADATA_VERSION\nFILE_NAME": validate's verdict on
// whether the two are one version, as pip's Version(metadata) == the file name's version),
// marker_eval (the marker's value in kTargetEnvironment, as "fields"; an error is a "no", as
// Marker.evaluate_prepared raising).
#include <algorithm>
#include <iostream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "index/model.h"
#include "manifest/requirement.h"
#include "packaging/marker.h"
#include "packaging/specifier.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"
#include "validate/metadata_standard.h"

namespace {

using namespace kiln;

// What packaging's parse_wheel_filename returns, as the oracle writes it: the normalised name,
// str(version), the build tag's (number, rest) and the sorted tags.
nlohmann::json fields(const packaging::WheelFileName& w) {
  nlohmann::json build = nlohmann::json::array();
  if (!w.build.empty()) {
    std::size_t digits = 0;
    while (digits < w.build.size() && is_ascii_digit(w.build[digits])) ++digits;
    std::string number = w.build.substr(0, digits);
    while (number.size() > 1 && number[0] == '0') number.erase(0, 1);
    build = {number, w.build.substr(digits)};
  }
  return {w.project, w.parsed_version.str(), build, w.tags()};
}

// A target's environment as resolve::marker_environment makes one (oracle.py holds the same).
const packaging::MarkerEnvironment kTargetEnvironment = {
    {"os_name", "posix"},
    {"sys_platform", "linux"},
    {"platform_system", "Linux"},
    {"platform_machine", "x86_64"},
    {"extra", ""},
    {"implementation_name", "cpython"},
    {"platform_python_implementation", "CPython"},
    {"python_version", "3.12"},
    {"python_full_version", "3.12.7"},
    {"implementation_version", "3.12.7"},
};

// The lines' indexes in PEP 440 order, equal versions in the order they came; none when a line is
// no version.
std::optional<std::vector<std::size_t>> sorted_order(const std::vector<std::string>& lines) {
  std::vector<packaging::Version> versions;
  for (const auto& line : lines) {
    auto v = packaging::Version::parse(line);
    if (!v) return std::nullopt;
    versions.push_back(std::move(*v));
  }
  std::vector<std::size_t> order(lines.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return versions[a] < versions[b]; });
  return order;
}

nlohmann::json verdict(const std::string& kind, const std::string& input) {
  bool ok = false;
  std::string why;
  if (kind == "version") {
    ok = packaging::is_version(input);
  } else if (kind == "canonical") {
    ok = packaging::is_canonical_version(input);
  } else if (kind == "specifier") {
    ok = packaging::is_valid_specifier_set(input);
  } else if (kind == "marker") {
    ok = packaging::is_valid_marker(input);
  } else if (kind == "requirement") {
    ok = manifest::is_valid_requirement(input);
  } else if (kind == "metadata") {
    auto problems = validate::standard_metadata_problems(input);
    ok = problems.empty();
    why = join(problems, "; ");
  } else if (kind == "same_version") {
    auto newline = input.find('\n');
    auto name = packaging::parse_wheel_file_name(input.substr(newline + 1));
    ok = newline != std::string::npos && name &&
         validate::same_version_as_file_name(input.substr(0, newline), *name);
  } else if (kind == "wheel_filename" || kind == "index_wheel_filename") {
    auto name = kind == "wheel_filename" ? packaging::parse_wheel_file_name(input)
                                         : index::index_wheel_name(input);
    if (!name) return {{"ok", false}, {"why", name.error().message}};
    return {{"ok", true}, {"fields", fields(*name)}};
  } else if (kind == "marker_eval") {
    auto value = packaging::evaluate_marker(input, kTargetEnvironment);
    if (!value) return {{"ok", false}, {"why", value.error().message}};
    return {{"ok", true}, {"fields", *value}};
  } else if (kind == "sort") {
    auto order = sorted_order(split(input, "\n"));
    if (!order) return {{"ok", false}, {"why", "a line is no version"}};
    return {{"ok", true}, {"order", *order}};
  } else {
    return {{"error", cat("unknown kind '", kind, "'")}};
  }
  return {{"ok", ok}, {"why", why}};
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    auto in = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (in.is_discarded() || !in.contains("kind") || !in.contains("input")) {
      std::cout << nlohmann::json{{"error", "not {kind, input}"}}.dump() << "\n";
      continue;
    }
    std::string input = in["input"].get<std::string>();
    std::cout << verdict(in["kind"].get<std::string>(), input)
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  }
  return 0;
}
