// What the core metadata standard alone refuses in a METADATA text, as the `packaging` library's
// Metadata.from_email(text, validate=True) decides (the differential test compares the two). The
// "metadata" check applies these rules and kiln's own on top (checks.h, metadata_check.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "packaging/wheel_name.h"

namespace kiln::validate {

// Each problem a line; empty when packaging takes the text.
std::vector<std::string> standard_metadata_problems(std::string_view text);

// Whether METADATA's Version is the file name's as installers compare them (pip's "metadata
// inconsistent" test: Version(metadata) == Version(file name's)), PEP 440 equality: "01.02" is
// "1.2", "1.0+Ubuntu-1" is "1.0+ubuntu.1". How either is spelled is kiln's rule, not this one.
bool same_version_as_file_name(std::string_view metadata_version,
                               const packaging::WheelFileName& name);

}  // namespace kiln::validate
