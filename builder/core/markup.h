// Text into HTML and XML (the index's pages, JUnit reports).
#pragma once

#include <string>
#include <string_view>

namespace kiln {

// & < > " ' as character references; a control character XML 1.0 forbids (all below 0x20 but
// tab, LF and CR) as '?'. Safe in element content and in quoted attribute values of both.
std::string markup_escape(std::string_view text);

}  // namespace kiln
