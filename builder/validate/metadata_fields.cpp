// Check "metadata", field by field, as strictly as the `packaging` library's
// Metadata.from_email(validate=True): every field one the core metadata specification knows and
// the declared Metadata-Version has, single fields once, and the values of Summary,
// Description-Content-Type, Provides-Extra, License-Expression, License-File, Dynamic and
// Project-URL well formed.
#include <algorithm>
#include <array>
#include <map>
#include <set>

#include "core/strings.h"
#include "manifest/license.h"
#include "manifest/version.h"
#include "validate/checks.h"
#include "validate/metadata_standard.h"
#include "wheel/metadata.h"

namespace kiln::validate {

namespace {

struct Field {
  const char* name;   // lowercase
  const char* added;  // the Metadata-Version that introduced it
  bool single;        // may appear once
};

constexpr std::array<Field, 32> kFields = {{
    {"metadata-version", "1.0", true},
    {"name", "1.0", true},
    {"version", "1.0", true},
    {"dynamic", "2.2", false},
    {"platform", "1.0", false},
    {"supported-platform", "1.1", false},
    {"summary", "1.0", true},
    {"description", "1.0", true},
    {"description-content-type", "2.1", true},
    {"keywords", "1.0", true},
    {"home-page", "1.0", true},
    {"download-url", "1.1", true},
    {"author", "1.0", true},
    {"author-email", "1.0", true},
    {"maintainer", "1.2", true},
    {"maintainer-email", "1.2", true},
    {"license", "1.0", true},
    {"license-expression", "2.4", true},
    {"license-file", "2.4", false},
    {"classifier", "1.1", false},
    {"requires-dist", "1.2", false},
    {"requires-python", "1.2", true},
    {"requires-external", "1.2", false},
    {"project-url", "1.2", false},
    {"provides-extra", "2.1", false},
    {"provides-dist", "1.2", false},
    {"obsoletes-dist", "1.2", false},
    {"import-name", "2.5", false},
    {"import-namespace", "2.5", false},
    {"requires", "1.1", false},
    {"provides", "1.1", false},
    {"obsoletes", "1.1", false},
}};

constexpr std::array<const char*, 9> kVersions = {"1.0", "1.1", "1.2", "2.1", "2.2",
                                                  "2.3", "2.4", "2.5", "2.6"};

int age(std::string_view version) {
  auto it = std::find(kVersions.begin(), kVersions.end(), version);
  return it == kVersions.end() ? -1 : static_cast<int>(it - kVersions.begin());
}

const Field* field_named(const std::string& lower_name) {
  for (const auto& f : kFields)
    if (lower_name == f.name) return &f;
  return nullptr;
}

// Each header a known field that the declared version has; single fields once.
void check_known(const wheel::ParsedMetadata& md, const std::string& mv, Findings& f) {
  std::map<std::string, int> seen;
  const int have = age(mv);
  for (const auto& [name, value] : md.headers) {
    std::string lower_name = lower(name);
    const Field* field = field_named(lower_name);
    if (!field) {
      f.fail(cat("METADATA field '", printable_excerpt(name), "' is not a core metadata field"));
      continue;
    }
    if (have >= 0 && age(field->added) > have)
      f.fail(cat("METADATA field ", name, " was introduced in metadata version ", field->added,
                 ", not ", mv));
    if (field->single && ++seen[lower_name] == 2) f.fail(cat("METADATA has ", name, " twice"));
  }
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

// PEP 639: relative, '/'-separated, resolved paths, each a file under .dist-info/licenses/.
std::string license_file_problem(const LoadedWheel& w, const std::string& path) {
  if (path.find("..") != std::string::npos) return "names a parent directory";
  if (path.find('*') != std::string::npos) return "is a pattern, not a path";
  if (path.empty() || path[0] == '/' || path.find('\\') != std::string::npos ||
      (path.size() > 1 && path[1] == ':'))
    return "is not a relative '/'-separated path";
  std::string want = cat(w.dist_info, "/licenses/", path);
  bool present = std::any_of(w.members.begin(), w.members.end(),
                             [&](const Member& m) { return m.name == want; });
  return present || w.dist_info.empty() ? "" : cat("names no file of the wheel (", want, ")");
}

void check_values(const LoadedWheel& w, const wheel::ParsedMetadata& md, Findings& f) {
  for (const auto& s : md.all("Summary"))
    if (breaks_line(s)) f.fail("METADATA Summary is not one line");
  for (const char* field : {"Import-Name", "Import-Namespace"})
    for (const auto& n : md.all(field))
      if (auto problem = import_name_problem(n, field); !problem.empty())
        f.fail(cat("METADATA ", field, " '", printable_excerpt(n), "' ", problem));
  for (const auto& t : md.all("Description-Content-Type"))
    if (auto problem = content_type_problem(t); !problem.empty())
      f.fail(cat("METADATA Description-Content-Type '", printable_excerpt(t), "' ", problem));
  for (const auto& e : md.all("Provides-Extra"))
    if (!manifest::is_valid_project_name(e))
      f.fail(cat("METADATA Provides-Extra '", printable_excerpt(e), "' is not a valid name"));
  for (const auto& l : md.all("License-Expression"))
    if (auto problem = manifest::license_expression_problem(l); !problem.empty())
      f.fail(cat("METADATA License-Expression '", printable_excerpt(l), "': ", problem));
  for (const auto& p : md.all("License-File"))
    if (auto problem = license_file_problem(w, p); !problem.empty())
      f.fail(cat("METADATA License-File '", printable_excerpt(p), "' ", problem));
  for (const auto& d : md.all("Dynamic")) {
    std::string name = lower(d);
    if (name == "name" || name == "version" || name == "metadata-version" || !field_named(name))
      f.fail(
          cat("METADATA Dynamic '", printable_excerpt(d), "' is not a field that may be dynamic"));
  }
  std::set<std::string> labels;
  for (const auto& u : md.all("Project-URL")) {
    auto comma = u.find(',');
    std::string label(trim(u.substr(0, comma)));
    if (comma == std::string::npos || trim(u.substr(comma + 1)).empty())
      f.fail(cat("METADATA Project-URL '", printable_excerpt(u), "' is not 'Label, URL'"));
    else if (!labels.insert(label).second)
      f.fail(cat("METADATA Project-URL label '", printable_excerpt(label), "' is used twice"));
  }
}

}  // namespace

bool is_known_metadata_version(std::string_view v) {
  return age(v) >= 0;
}

void check_metadata_fields(const LoadedWheel& w, const wheel::ParsedMetadata& md,
                           const std::string& mv, Findings& f) {
  check_known(md, mv, f);
  check_values(w, md, f);
}

}  // namespace kiln::validate

namespace kiln::validate {

namespace {

// The field problems packaging finds in one field's values (`values` in order, `name` lowercase).
void standard_field(const std::string& name, const std::vector<std::string>& values,
                    std::vector<std::string>& out) {
  auto bad = [&](std::string_view v, std::string_view why) {
    out.push_back(cat(name, " '", printable_excerpt(v), "' ", why));
  };
  for (const auto& v : values) {
    if (name == "name" && !manifest::is_valid_project_name(v)) bad(v, "is not a valid name");
    if (name == "version" && !manifest::is_pep440_version(v)) bad(v, "is not a PEP 440 version");
    if (name == "summary" && breaks_line(v)) bad(v, "is not one line");
    if (name == "description-content-type" && !content_type_problem(v).empty())
      bad(v, content_type_problem(v));
    if (name == "provides-extra" && !manifest::is_valid_project_name(v)) bad(v, "is not a name");
    if (name == "requires-python" && !is_blank_text(v) && !manifest::is_valid_specifier_set(v))
      bad(v, "is not a specifier set");
    if (name == "requires-dist" && !manifest::is_valid_requirement(v))
      bad(v, "is not a requirement");
    if (name == "license-expression" && !manifest::license_expression_problem(v).empty())
      bad(v, manifest::license_expression_problem(v));
    if (name == "license-file") {
      LoadedWheel none;
      if (auto problem = license_file_problem(none, v); !problem.empty()) bad(v, problem);
    }
    if (name == "import-name" || name == "import-namespace") {
      std::string field = name == "import-name" ? "Import-Name" : "Import-Namespace";
      if (auto problem = import_name_problem(v, field); !problem.empty()) bad(v, problem);
    }
    if (name == "dynamic") {
      std::string d = lower(v);
      if (d == "name" || d == "version" || d == "metadata-version" || !field_named(d))
        bad(v, "is not a field that may be dynamic");
    }
  }
}

}  // namespace

std::vector<std::string> standard_metadata_problems(std::string_view text) {
  std::vector<std::string> out;
  if (!is_valid_utf8(text)) return {"not UTF-8"};
  wheel::ParsedMetadata md = wheel::parse_metadata(text);
  std::map<std::string, std::vector<std::string>> fields;
  for (const auto& [name, value] : md.headers) fields[lower(name)].push_back(value);
  const std::string mv = md.first("Metadata-Version");
  const int have = age(mv);
  if (have < 0) out.push_back(cat("Metadata-Version '", printable_excerpt(mv), "' is not known"));
  for (const char* required : {"metadata-version", "name", "version"})
    if (fields.count(required) == 0 || fields[required][0].empty())
      out.push_back(cat(required, " is missing"));
  for (const auto& [name, values] : fields) {
    const Field* field = field_named(name);
    if (!field) {
      out.push_back(cat("unrecognized field '", printable_excerpt(name), "'"));
      continue;
    }
    if (field->single && values.size() > 1) out.push_back(cat(name, " appears twice"));
    if (have >= 0 && age(field->added) > have) out.push_back(cat(name, " is newer than ", mv));
    standard_field(name, values, out);
  }
  std::set<std::string> labels;
  for (const auto& u : md.all("Project-URL"))
    if (!labels.insert(std::string(trim(u.substr(0, u.find(','))))).second)
      out.push_back(cat("Project-URL label of '", printable_excerpt(u), "' is used twice"));
  if (fields.count("description") && !md.body.empty())
    out.push_back("Description is both a field and the body");
  return out;
}

}  // namespace kiln::validate
