// Core metadata (METADATA, version 2.4, email-header format), WHEEL and RECORD texts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kiln::wheel {

struct CoreMetadata {
  std::string name;     // display name
  std::string version;  // with local label when there is one
  std::string summary;
  std::string keywords;
  std::string home_page;
  std::string author, author_email, maintainer, maintainer_email;
  std::string license_expression;          // SPDX (PEP 639)
  std::vector<std::string> license_files;  // paths relative to .dist-info/licenses/
  std::vector<std::string> classifiers;
  std::vector<std::string> project_urls;  // "Label, URL"
  std::string requires_python;
  std::vector<std::string> requires_dist;
  std::vector<std::string> provides_extra;  // besides those requires_dist's markers name
  std::string description;                  // the body; may be empty
  std::string description_content_type;

  // Metadata-Version 2.4. Provides-Extra: provides_extra, then each other extra an
  // `extra == "x"` marker in requires_dist names.
  std::string render() const;
};

std::string render_wheel_file(const std::string& generator, bool root_is_purelib,
                              const std::string& tag);

struct RecordRow {
  std::string path;
  std::string hash;  // "sha256=<urlsafe b64 nopad>", or "" for RECORD itself
  std::string size;  // decimal, or ""
};
std::string render_record(const std::vector<RecordRow>& rows);
// "sha256=..." of data, as RECORD wants it.
std::string record_hash(std::string_view data);

// Rewrites a requirement on torch (without extra markers) to torch==M.m.*; others unchanged.
std::vector<std::string> pin_torch(const std::vector<std::string>& requires_dist,
                                   const std::string& torch_minor, bool add_if_missing);

// PKG-INFO / METADATA parsing: headers (repeatable, in order) and the body.
struct ParsedMetadata {
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::vector<std::string> all(std::string_view name) const;  // case-insensitive
  std::string first(std::string_view name) const;
};
ParsedMetadata parse_metadata(std::string_view text);

}  // namespace kiln::wheel
