#include "toolchain/compiler.h"

#include "core/process.h"
#include "core/strings.h"

namespace kiln::toolchain {

nlohmann::json HostCompiler::identity() const {
  return {{"version", version}, {"version_text", version_text}};
}

Expected<HostCompiler> probe_compiler(const std::string& command) {
  auto path = find_program(command);
  if (path.empty()) return Error::failed(cat("host compiler '", command, "' not found on PATH"));
  KILN_TRY(std::string version, run_capture({path.string(), "-dumpfullversion"}));
  KILN_TRY(std::string text, run_capture({path.string(), "--version"}));
  return HostCompiler{command, path.string(), std::string(trim(version)),
                      std::string(trim(split(text, "\n").empty() ? text : split(text, "\n")[0]))};
}

}  // namespace kiln::toolchain
