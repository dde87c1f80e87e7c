// What the core metadata standard alone refuses in a METADATA text, as the `packaging` library's
// Metadata.from_email(text, validate=True) decides (the differential test compares the two). The
// "metadata" check applies these rules and kiln's own on top (checks.h, metadata_check.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::validate {

// Each problem a line; empty when packaging takes the text.
std::vector<std::string> standard_metadata_problems(std::string_view text);

}  // namespace kiln::validate
