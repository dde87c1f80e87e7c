#include "toolchain/cuda.h"

#include <cstdlib>
#include <regex>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

int CudaToolkit::major() const { return std::atoi(version.c_str()); }

nlohmann::json CudaToolkit::identity() const {
  return {{"version", version}, {"nvcc_version", version_text}};
}

std::string parse_nvcc_release(const std::string& version_text) {
  static const std::regex re(R"(release ([0-9]+\.[0-9]+))");
  std::smatch m;
  return std::regex_search(version_text, m, re) ? m[1].str() : std::string();
}

Expected<void> check_cuda_matches(const CudaToolkit& toolkit, const std::string& wanted_version,
                                  const std::string& wanted_by) {
  int wanted_major = std::atoi(wanted_version.c_str());
  if (wanted_major != toolkit.major())
    return Error::failed(cat(wanted_by, " needs CUDA ", wanted_version, " but the toolkit at ",
                             toolkit.home.string(), " is CUDA ", toolkit.version,
                             ": install a CUDA ", wanted_major, ".x toolkit and point CUDA_HOME at it"));
  return {};
}

GccRange supported_gcc(const CudaToolkit& toolkit) {
  GccRange range;
  auto text = read_file(toolkit.home / "include" / "crt" / "host_config.h");
  if (!text) return range;
  // The GNU block: "#if __GNUC__ > 15" followed by "#error -- unsupported GNU version!".
  static const std::regex re(R"(#if\s+__GNUC__\s*>\s*([0-9]+)\s*\n\s*\n?\s*#error[^\n]*unsupported GNU version)");
  std::smatch m;
  if (std::regex_search(*text, m, re)) range.max = std::stoi(m[1].str());
  return range;
}

Expected<void> check_host_compiler(const CudaToolkit& toolkit, const HostCompiler& cxx) {
  if (cxx.version_text.find("clang") != std::string::npos) return {};
  int major = std::atoi(cxx.version.c_str());
  GccRange range = supported_gcc(toolkit);
  if (major <= 0 || range.max == 0) return {};
  if (major < range.min || major > range.max)
    return Error::failed(cat("host compiler ", cxx.command, " ", cxx.version, " (", cxx.path, ") is outside the GCC versions CUDA ",
                             toolkit.version, " supports (", range.min, " to ", range.max, ", from ",
                             (toolkit.home / "include" / "crt" / "host_config.h").string(),
                             "): install a g++ in that range and name it in the target's [compiler] cxx"));
  return {};
}

std::unique_ptr<CudaSource> make_cuda_source(const CudaRequest& request, const fs::path& toolkits, FetchPinned fetch) {
  if (request.toolkit == "wheels") return wheels_cuda_source(request, toolkits, std::move(fetch));
  return system_cuda_source(request);
}

}  // namespace kiln::toolchain
