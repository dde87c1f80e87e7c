// Project pages of a simple package index: PEP 691 JSON and PEP 503 HTML, read into one list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::fetch {

inline constexpr const char* kSimpleJsonType = "application/vnd.pypi.simple.v1+json";
// What kiln asks for: JSON first, then either HTML flavour.
inline constexpr const char* kSimpleAccept =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
    "text/html;q=0.1";

struct IndexFile {
  std::string filename;
  std::string url;                    // absolute http(s), without fragment
  std::string sha256;                 // lowercase hex, "" when the index gives none
  std::optional<std::uint64_t> size;  // PEP 700 "size" (JSON pages only)
  // PEP 658/714: the index serves the wheel's METADATA at <url>.metadata ("core-metadata",
  // "dist-info-metadata", data-core-metadata, data-dist-info-metadata), with its sha256 if given.
  bool has_metadata = false;
  std::string metadata_sha256;
};

// The links of a page that were left out (see below), for a warning.
struct LeftOut {
  std::size_t count = 0;
  std::string first;  // an excerpt of the first, control characters shown as '?'
};

// `page_url`: where the page came from (after redirects); relative file URLs resolve against it.
// Every IndexFile's url is http(s): a link that resolves to anything else (file://, ftp:, data:)
// is left out and counted in `left_out` (a page is a stranger's and may not name local files).
Expected<std::vector<IndexFile>> parse_json_page(std::string_view text, const std::string& page_url,
                                                 LeftOut* left_out = nullptr);
Expected<std::vector<IndexFile>> parse_html_page(std::string_view text, const std::string& page_url,
                                                 LeftOut* left_out = nullptr);

// Picks the parser from the Content-Type ("" or unknown: a page starting with '{' is JSON).
Expected<std::vector<IndexFile>> parse_project_page(std::string_view text,
                                                    std::string_view content_type,
                                                    const std::string& page_url,
                                                    LeftOut* left_out = nullptr);

}  // namespace kiln::fetch
