// The end of a command that checks wheels and reports as `kiln validate` does (validate, verify).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/context.h"
#include "validate/validate.h"

namespace kiln::cli {

// With --json the reports on stdout (each text report was printed as it came); with `junit` a
// JUnit XML file; a line naming how many failed ("failed <what>"). Returns the exit code: 1 when
// one failed, else 0.
int finish_reports(const Context& ctx, const std::vector<validate::Report>& reports,
                   const std::string& junit, std::string_view what);

}  // namespace kiln::cli
