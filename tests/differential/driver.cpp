// kiln's verdicts on many inputs in one process, for tests/e2e/test_validate_differential.py,
// which compares them with the `packaging` library's. Reads JSON lines {"kind": K, "input": S}
// on stdin and writes one line {"ok": true|false, "why": "..."} per input, in order. Kinds:
// version (packaging's Version()), canonical (kiln's canonical public version), specifier
// (SpecifierSet(), blank refused by kiln), marker (Marker()), requirement (Requirement()),
// metadata (Metadata.from_email(validate=True), the standard's rules only), wheel_filename
// (parse_wheel_filename's structure as kiln reads it, with the name and version checked).
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

// The file name's checks besides its structure, which `kiln validate` makes against METADATA:
// the name's characters (word characters, '.', no "__"), the interpreter tags identifiers.
bool word(char c) {
  return is_ascii_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}
bool wheel_name_ok(const std::string& n) {
  for (char c : n)
    if (!word(c) && c != '.') return false;
  return !n.empty() && n.find("__") == std::string::npos;
}
bool identifier(const std::string& t) {
  for (char c : t)
    if (!word(c)) return false;
  return !t.empty() && !is_ascii_digit(t[0]);
}

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
    if (!ok) {
      why = name.error().message;
    } else if (!wheel_name_ok(name->distribution)) {
      ok = false, why = "name";
    } else if (!manifest::is_pep440_version(name->version)) {
      ok = false, why = "version";
    } else {
      for (const auto& py : name->python_tags)
        if (!identifier(py)) ok = false, why = "python tag";
    }
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
