// The one way kiln parses JSON: nlohmann's parser, after a check of the document's nesting.
// nlohmann parses iteratively, but a parsed value is copied, compared and dumped recursively: a
// document of arrays nested 100,000 deep (a `--python` that prints one to `kiln doctor`) overflowed
// the stack. No document kiln reads nests deeper than a few levels.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kiln {

// How deep arrays and objects may nest in any JSON kiln reads.
inline constexpr std::size_t kMaxJsonDepth = 64;

// The nesting depth of `text`'s arrays and objects (brackets inside strings do not count),
// counted in one pass without recursion; stops counting past `limit`.
std::size_t json_depth(std::string_view text, std::size_t limit = kMaxJsonDepth);

// `text` parsed, or a discarded value (is_discarded()) when it is not JSON or nests deeper than
// `max_depth`. Never throws.
nlohmann::json parse_json(std::string_view text, std::size_t max_depth = kMaxJsonDepth);

}  // namespace kiln
