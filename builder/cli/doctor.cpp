// kiln doctor [--python PATH] [--libcuda PATH] [--server URL] [--json]: what this GPU host has and
// needs for transformers' Gated DeltaNet fast path (docs/doctor.md). Exit 0 when the fast path is
// ready, 1 when not.
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <iostream>

#include "cli/context.h"
#include "core/strings.h"
#include "doctor/doctor.h"

namespace kiln::cli {

std::function<int()> configure_doctor(CLI::App& sub, Context& ctx) {
  auto opts = std::make_shared<doctor::Options>();
  sub.add_option(
      "--python", opts->python,
      "The interpreter of the environment to examine (default: python3 on PATH, past the "
      "venv of a kiln installed by uvx, uv tool or pipx)");
  sub.add_option("--libcuda", opts->libcuda,
                 "The driver library to load instead of libcuda.so.1 (default: $KILN_LIBCUDA; a "
                 "test and diagnostic hook)");
  sub.add_option("--server", opts->server,
                 "kiln serve's URL for the install command (default: http://<buildhost>:8000)");
  sub.add_option("--timeout", opts->timeout_s, "Seconds for the import checks (default: 300)")
      ->check(CLI::Range(1, 86400));
  return [&ctx, opts] {
    opts->python = doctor::resolve_python(opts->python);
    if (opts->libcuda.empty())
      if (const char* env = std::getenv("KILN_LIBCUDA"); env && *env) opts->libcuda = env;
    nlohmann::json report = doctor::run_script(*opts).value();
    report["kiln"] = doctor::static_checks(report, opts->python);
    if (ctx.json)
      std::cout << report.dump(1) << "\n";
    else
      std::cout << doctor::render_text(report);
    return report["kiln"]["ok"].get<bool>() ? 0 : 1;
  };
}

}  // namespace kiln::cli
