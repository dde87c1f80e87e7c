// The core metadata standard's rules on a METADATA text, as the `packaging` library's
// Metadata.from_email(validate=True) applies them: every field one the specification knows and
// the declared Metadata-Version has, single fields once, Name, Version, Requires-Dist and
// Requires-Python parsed, the values of Summary, Description-Content-Type, Provides-Extra,
// License-Expression, License-File, Import-Name, Dynamic and Project-URL well formed. The
// differential test compares these verdicts with packaging's (tests/differential); kiln's own
// rules are metadata_check.cpp's.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "core/strings.h"
#include "manifest/license.h"
#include "manifest/limits.h"
#include "manifest/requirement.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"
#include "validate/checks.h"
#include "validate/metadata_standard.h"
#include "wheel/metadata.h"

namespace kiln::validate {

namespace {

struct Field {
  const char* name;   // as the specification spells it
  const char* added;  // the Metadata-Version that introduced it
  bool single;        // may appear once
};

constexpr std::array<Field, 32> kFields = {{
    {"Metadata-Version", "1.0", true},
    {"Name", "1.0", true},
    {"Version", "1.0", true},
    {"Dynamic", "2.2", false},
    {"Platform", "1.0", false},
    {"Supported-Platform", "1.1", false},
    {"Summary", "1.0", true},
    {"Description", "1.0", true},
    {"Description-Content-Type", "2.1", true},
    {"Keywords", "1.0", true},
    {"Home-page", "1.0", true},
    {"Download-URL", "1.1", true},
    {"Author", "1.0", true},
    {"Author-email", "1.0", true},
    {"Maintainer", "1.2", true},
    {"Maintainer-email", "1.2", true},
    {"License", "1.0", true},
    {"License-Expression", "2.4", true},
    {"License-File", "2.4", false},
    {"Classifier", "1.1", false},
    {"Requires-Dist", "1.2", false},
    {"Requires-Python", "1.2", true},
    {"Requires-External", "1.2", false},
    {"Project-URL", "1.2", false},
    {"Provides-Extra", "2.1", false},
    {"Provides-Dist", "1.2", false},
    {"Obsoletes-Dist", "1.2", false},
    {"Import-Name", "2.5", false},
    {"Import-Namespace", "2.5", false},
    {"Requires", "1.1", false},
    {"Provides", "1.1", false},
    {"Obsoletes", "1.1", false},
}};

constexpr std::array<const char*, 9> kVersions = {"1.0", "1.1", "1.2", "2.1", "2.2",
                                                  "2.3", "2.4", "2.5", "2.6"};

int age(std::string_view version) {
  auto it = std::find(kVersions.begin(), kVersions.end(), version);
  return it == kVersions.end() ? -1 : static_cast<int>(it - kVersions.begin());
}

const Field* field_named(const std::string& lower_name) {
  for (const auto& f : kFields)
    if (lower_name == lower(f.name)) return &f;
  return nullptr;
}

// packaging's _LINE_BOUNDARY_RE: \n \r \v \f \x1c \x1d \x1e U+0085 U+2028 U+2029.
bool is_blank_text(std::string_view s) {
  return std::all_of(s.begin(), s.end(), is_ascii_space);
}

bool breaks_line(std::string_view s) {
  if (s.find_first_of("\n\r\v\f\x1c\x1d\x1e") != std::string_view::npos) return true;
  return s.find("\xc2\x85") != std::string_view::npos ||
         s.find("\xe2\x80\xa8") != std::string_view::npos ||
         s.find("\xe2\x80\xa9") != std::string_view::npos;
}

bool is_python_keyword(std::string_view w) {
  static const std::set<std::string_view> kKeywords = {
      "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
      "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
      "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
      "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};
  return kKeywords.count(w) > 0;
}

// Python's str.isidentifier() for ASCII; a non-ASCII byte is taken as a letter.
bool is_identifier(std::string_view w) {
  auto letter = [](char c) {
    return is_ascii_alpha(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
  };
  return !w.empty() && letter(w[0]) &&
         std::all_of(w.begin(), w.end(), [&](char c) { return letter(c) || is_ascii_digit(c); });
}

// Import-Name / Import-Namespace (PEP 794): a dotted name of identifiers, not keywords, then
// perhaps "; private". A lone empty Import-Name says "none".
std::string import_name_problem(std::string_view value, std::string_view field) {
  if (value.empty() && field == "Import-Name") return "";
  auto semicolon = value.find(';');
  std::string_view name = value.substr(0, semicolon);
  while (!name.empty() && is_ascii_space(name.back())) name.remove_suffix(1);
  for (const auto& part : split(name, ".", /*skip_empty=*/false)) {
    if (!is_identifier(part)) return cat("has '", part, "', not an identifier");
    if (is_python_keyword(part)) return cat("has '", part, "', a keyword");
  }
  if (semicolon != std::string_view::npos) {
    std::string_view option = value.substr(semicolon + 1);
    while (!option.empty() && is_ascii_space(option.front())) option.remove_prefix(1);
    if (option != "private") return "has an option other than 'private'";
  }
  return "";
}

// text/plain, text/x-rst or text/markdown; charset UTF-8; Markdown's variant GFM or CommonMark.
std::string content_type_problem(const std::string& value) {
  auto parts = split(value, ";", /*skip_empty=*/false);
  std::string type = lower(std::string(trim(parts[0])));
  if (type != "text/plain" && type != "text/x-rst" && type != "text/markdown")
    return "must be text/plain, text/x-rst or text/markdown";
  for (std::size_t i = 1; i < parts.size(); ++i) {
    std::string param(trim(parts[i]));
    auto eq = param.find('=');
    if (eq == std::string::npos) return cat("has a parameter without a value: '", param, "'");
    std::string key = lower(std::string(trim(param.substr(0, eq))));
    std::string v(trim(param.substr(eq + 1)));
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    if (key == "charset" && lower(v) != "utf-8") return "may only name the UTF-8 charset";
    if (key == "variant" && type == "text/markdown" && v != "GFM" && v != "CommonMark")
      return "names a Markdown variant other than GFM or CommonMark";
  }
  return "";
}

// PEP 639: relative, '/'-separated, resolved paths (each must be a file under
// .dist-info/licenses/: metadata_check.cpp looks for it in the wheel).
std::string license_file_problem(const std::string& path) {
  if (path.find("..") != std::string::npos) return "names a parent directory";
  if (path.find('*') != std::string::npos) return "is a pattern, not a path";
  if (path.empty() || path[0] == '/' || path.find('\\') != std::string::npos ||
      (path.size() > 1 && path[1] == ':'))
    return "is not a relative '/'-separated path";
  return "";
}

std::string dynamic_problem(const std::string& value) {
  std::string d = lower(value);
  bool may = d != "name" && d != "version" && d != "metadata-version" && field_named(d);
  return may ? "" : "is not a field that may be dynamic";
}

// kiln's length caps (manifest/limits.h) come before any parsing: a value beyond them is refused
// whole, for every wheel.
std::size_t cap_of(const std::string& lower_name) {
  if (lower_name == "name") return manifest::kMaxNameBytes;
  if (lower_name == "requires-dist" || lower_name == "requires-python")
    return manifest::kMaxRequirementBytes;
  return 0;
}

// What is wrong with one value of a field (`name` lowercase), "" when nothing is.
std::string value_problem(const std::string& name, const std::string& v) {
  if (std::size_t cap = cap_of(name); cap && v.size() > cap)
    return cat("is longer than ", cap, " bytes");
  if (name == "name" && !packaging::is_valid_project_name(v)) return "is not a valid project name";
  if (name == "version" && !packaging::is_version(v)) return "is not a PEP 440 version";
  if (name == "summary" && breaks_line(v)) return "is not one line";
  if (name == "description-content-type") return content_type_problem(v);
  if (name == "provides-extra" && !packaging::is_valid_project_name(v))
    return "is not a valid name";
  if (name == "requires-python" && !is_blank_text(v) && !packaging::is_valid_specifier_set(v))
    return "is not a valid specifier set";
  if (name == "requires-dist" && !manifest::is_valid_requirement(v))
    return "is not a valid PEP 508 requirement";
  if (name == "license-expression")
    if (auto problem = manifest::license_expression_problem(v); !problem.empty())
      return cat("is invalid: ", problem);
  if (name == "license-file") return license_file_problem(v);
  if (name == "import-name") return import_name_problem(v, "Import-Name");
  if (name == "import-namespace") return import_name_problem(v, "Import-Namespace");
  if (name == "dynamic") return dynamic_problem(v);
  return "";
}

// The problems of one field, all its values in order (`name` as the first header spelled it).
void field_problems(const std::string& name, const std::vector<std::string>& values,
                    const std::string& mv, std::vector<std::string>& out) {
  const Field* field = field_named(lower(name));
  if (!field) {
    out.push_back(cat("field '", printable_excerpt(name), "' is not a core metadata field"));
    return;
  }
  if (field->single && values.size() > 1) out.push_back(cat("has ", field->name, " twice"));
  if (age(mv) >= 0 && age(field->added) > age(mv))
    out.push_back(cat("field ", field->name, " was introduced in metadata version ", field->added,
                      ", not ", mv));
  for (const auto& v : values)
    if (auto problem = value_problem(lower(name), v); !problem.empty())
      out.push_back(cat(field->name, " '", printable_excerpt(v), "' ", problem));
}

}  // namespace

bool is_known_metadata_version(std::string_view v) {
  return age(v) >= 0;
}

std::vector<std::string> standard_metadata_problems(std::string_view text) {
  if (!is_valid_utf8(text)) return {"is not UTF-8"};
  wheel::ParsedMetadata md = wheel::parse_metadata(text);
  std::vector<std::string> out;
  const std::string mv = md.first("Metadata-Version");
  if (!mv.empty() && age(mv) < 0)
    out.push_back(
        cat("Metadata-Version '", printable_excerpt(mv), "' is not a known core metadata version"));
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> fields;
  for (const auto& [name, value] : md.headers) {
    auto& [spelled, values] = fields[lower(name)];
    if (values.empty()) spelled = name;
    values.push_back(value);
  }
  for (const char* required : {"Metadata-Version", "Name", "Version"})
    if (md.first(required).empty()) out.push_back(cat("has no ", required));
  for (const auto& [lower_name, field] : fields) field_problems(field.first, field.second, mv, out);
  std::set<std::string> labels;
  for (const auto& u : md.all("Project-URL"))
    if (std::string label(trim(u.substr(0, u.find(',')))); !labels.insert(label).second)
      out.push_back(cat("Project-URL label '", printable_excerpt(label), "' is used twice"));
  if (fields.count("description") && !md.body.empty())
    out.push_back("has Description both as a field and as the body");
  return out;
}

}  // namespace kiln::validate
