// PEP 508 environment markers, validated (not evaluated) as the `packaging` library's Marker()
// parses them: `marker_var op marker_var` joined by and/or, in parentheses nested at most 200
// deep, marker_var a known variable or a quoted string.
#pragma once

#include <string_view>

namespace kiln::manifest {

// A whole marker expression ("python_version >= '3.9' and extra == 'x'"), white space around it
// allowed.
bool is_valid_marker(std::string_view marker);

}  // namespace kiln::manifest
