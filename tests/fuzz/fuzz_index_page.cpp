// Project pages of a package index as kiln reads them (fetch/simple_index.h): PEP 691 JSON and
// PEP 503 HTML from a stranger's server. Input: one byte choosing the parser (even: by the
// Content-Type, JSON; odd: HTML; with bit 1: no Content-Type, sniffed), then the page. Every file
// kiln takes from a page must have an absolute http(s) URL without a fragment: a page never makes
// kiln read a local file.
#include "fetch/simple_index.h"
#include "fetch/url.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(index_page) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::string_view page = kiln::fuzz::text(data + 1, size - 1);
  std::string_view type = (mode & 2)   ? ""
                          : (mode & 1) ? "text/html; charset=utf-8"
                                       : "application/vnd.pypi.simple.v1+json";
  auto files = kiln::fetch::parse_project_page(page, type, "https://index.test/simple/torch/");
  if (!files) {
    if (files.error().message.empty()) fail("an error without a message");
    return 0;
  }
  for (const auto& f : *files) {
    if (!kiln::fetch::is_http_url(f.url)) fail("a file URL that is not http(s)");
    if (f.url.find('#') != std::string::npos) fail("a file URL with a fragment");
    (void)kiln::fetch::url_filename(f.url);
  }
  return 0;
}
