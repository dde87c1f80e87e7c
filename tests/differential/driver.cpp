// kiln's verdicts on many inputs in one process, for tests/e2e/test_validate_differential.py,
// which compares them with the `packaging` library's. Reads JSON lines {"kind": K, "input": S}
// on stdin and writes one line {"ok": true|false, "why": "..."} per input, in order. Kinds:
// version (packaging's Version()), canonical (kiln's canonical public version), specifier
// (SpecifierSet(), blank refused by kiln), marker (Marker()), requirement (Requirement()),
// metadata (Metadata.from_email(validate=True): the standard's rules, which `kiln validate`
// applies with kiln's own on top), wheel_filename (parse_wheel_filename()).
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "manifest/marker.h"
#include "manifest/version.h"
#include "validate/metadata_standard.h"
#include "validate/validate.h"

namespace {

using namespace kiln;

nlohmann::json verdict(const std::string& kind, const std::string& input) {
  bool ok = false;
  std::string why;
  if (kind == "version") {
    ok = manifest::is_pep440_version(input);
  } else if (kind == "canonical") {
    ok = manifest::is_valid_version(input);
  } else if (kind == "specifier") {
    ok = manifest::is_valid_specifier_set(input);
  } else if (kind == "marker") {
    ok = manifest::is_valid_marker(input);
  } else if (kind == "requirement") {
    ok = manifest::is_valid_requirement(input);
  } else if (kind == "metadata") {
    auto problems = validate::standard_metadata_problems(input);
    ok = problems.empty();
    why = join(problems, "; ");
  } else if (kind == "wheel_filename") {
    auto name = validate::parse_wheel_filename(input);
    ok = name.has_value();
    if (!ok) why = name.error().message;
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
