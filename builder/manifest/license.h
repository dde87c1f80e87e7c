// SPDX license expressions (PEP 639's License-Expression), checked as strictly as the `packaging`
// library checks them: the syntax (names and AND/OR/WITH in turn, balanced parentheses) and every
// identifier against the SPDX License List (spdx_ids.inc, made by scripts/gen-spdx).
#pragma once

#include <string>
#include <string_view>

namespace kiln::manifest {

// "" when `expression` is a valid SPDX license expression, else what is wrong with it.
std::string license_expression_problem(std::string_view expression);

}  // namespace kiln::manifest
