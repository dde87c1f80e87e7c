#include "cli/reports.h"

#include <algorithm>
#include <iostream>

#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cli {

int finish_reports(const Context& ctx, const std::vector<validate::Report>& reports,
                   const std::string& junit, std::string_view what) {
  // A name in a wheel need not be UTF-8: such bytes are written as U+FFFD, never a throw.
  if (ctx.json)
    std::cout << validate::render_json(reports).dump(2, ' ', false,
                                                     nlohmann::json::error_handler_t::replace)
              << "\n";
  if (!junit.empty())
    write_file_atomic(absolute_path(junit), validate::render_junit(reports)).value();
  std::size_t failed = std::count_if(reports.begin(), reports.end(),
                                     [](const validate::Report& r) { return !r.ok(); });
  if (failed) log::error(cat(failed, " of ", reports.size(), " wheel(s) failed ", what));
  return failed ? 1 : 0;
}

}  // namespace kiln::cli
