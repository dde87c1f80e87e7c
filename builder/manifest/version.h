// Python packaging names and versions: PEP 503 names, PEP 440 versions, specifiers, PEP 508
// requirements (validated, not evaluated).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kiln::manifest {

bool is_valid_project_name(std::string_view name);
std::string normalize_name(std::string_view name);  // PEP 503: lowercase, runs of -_. -> '-'
std::string wheel_name(std::string_view name);      // for file names: runs of -_. -> '_'

bool is_valid_version(std::string_view version);  // canonical public PEP 440 version
// Any version packaging's Version() takes: non-canonical spellings ("v1.0-1", "1.0.POST",
// "1.0alpha") and a local label, white space around it.
bool is_pep440_version(std::string_view version);
// PEP 440 ordering for canonical public versions; < 0, 0, > 0.
int compare_versions(std::string_view a, std::string_view b);

// As packaging's SpecifierSet() takes them (non-canonical versions too), but not blank.
bool is_valid_specifier_set(std::string_view specifiers);  // ">=3.9", ">=3.9,<4"
// As packaging's Requirement() takes it, the marker parsed (manifest/marker.h); no control
// characters but the tab.
bool is_valid_requirement(std::string_view requirement);     // "einops", "torch>=2.7; extra == 'x'"
std::string requirement_name(std::string_view requirement);  // normalised project name

}  // namespace kiln::manifest
