// PEP 508 requirements (validated, not evaluated), as packaging 26.4 judges them.
#pragma once

#include <string>
#include <string_view>

namespace kiln::manifest {

// As packaging's Requirement() takes it, the marker parsed (packaging/marker.h); no control
// characters but the tab.
bool is_valid_requirement(std::string_view requirement);     // "einops", "torch>=2.7; extra == 'x'"
std::string requirement_name(std::string_view requirement);  // normalised project name

}  // namespace kiln::manifest
