// PEP 508 environment markers as the `packaging` library's Marker() parses them — `marker_var op
// marker_var` joined by and/or, in parentheses nested at most 200 deep, marker_var a known
// variable or a quoted string — and as Marker.evaluate() evaluates them.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln::packaging {

// A whole marker expression ("python_version >= '3.9' and extra == 'x'"), white space around it
// allowed.
bool is_valid_marker(std::string_view marker);

// The variables' values a marker is evaluated with, by their canonical names ("os_name" for
// "os.name", "platform_python_implementation" for "python_implementation"); "extra" normalised.
using MarkerEnvironment = std::map<std::string, std::string, std::less<>>;

// What Marker(marker).evaluate(environment) returns: `and` before `or`; a version variable
// (python_version, python_full_version, implementation_version, platform_release) compared as
// the specifier `op value` contains it when that is a specifier, else as text (== and != as
// equality, <= and >= too, < and > false: packaging 26 orders no text); `in`/`not in` as
// substrings. Errors (bad input) where packaging raises: the marker does not parse, it names a
// variable `environment` lacks (the message names it), or `~=`/`===` compares text.
Expected<bool> evaluate_marker(std::string_view marker, const MarkerEnvironment& environment);

}  // namespace kiln::packaging
