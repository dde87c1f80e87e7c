// Project names (PEP 503, PEP 508): what a valid name is, its normalised form and the form a file
// name spells it in.
#pragma once

#include <string>
#include <string_view>

namespace kiln::packaging {

// PEP 508: ASCII letters and digits, '.', '_' and '-' between them.
bool is_valid_project_name(std::string_view name);
// PEP 503: lower case, each run of '-', '_' and '.' one '-' ("Causal_Conv1d" -> "causal-conv1d").
std::string normalize_name(std::string_view name);
// The name in a wheel's or sdist's file name: normalised, '-' as '_' ("causal_conv1d").
std::string file_name_part(std::string_view name);

}  // namespace kiln::packaging
