#include "toolchain/cuda.h"

#include <cstdlib>
#include <regex>
#include <vector>

#include "core/process.h"
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

Expected<CudaToolkit> detect_cuda(const std::string& home_hint) {
  std::vector<std::pair<fs::path, std::string>> candidates;  // (home, why)
  if (!home_hint.empty()) candidates.emplace_back(home_hint, "the target's cuda.home");
  if (const char* e = std::getenv("CUDA_HOME"); e && *e) candidates.emplace_back(e, "$CUDA_HOME");
  if (const char* e = std::getenv("CUDA_PATH"); e && *e) candidates.emplace_back(e, "$CUDA_PATH");
  if (fs::path nvcc = find_program("nvcc"); !nvcc.empty())
    candidates.emplace_back(fs::weakly_canonical(nvcc).parent_path().parent_path(), "nvcc on PATH");
  candidates.emplace_back("/usr/local/cuda", "/usr/local/cuda");
  std::vector<std::string> looked;
  for (const auto& [home, why] : candidates) {
    fs::path nvcc = home / "bin" / "nvcc";
    looked.push_back(cat(home.string(), " (", why, ")"));
    std::error_code ec;
    if (!fs::exists(nvcc, ec)) continue;
    auto text = run_capture({nvcc.string(), "--version"});
    if (!text) return Error::failed(cat("cannot run ", nvcc.string(), ": ", text.error().message));
    CudaToolkit t{home, nvcc, parse_nvcc_release(*text), *text};
    if (t.version.empty()) return Error::failed(cat("cannot read the CUDA release from ", nvcc.string(), " --version"));
    return t;
  }
  return Error::failed(cat("no CUDA toolkit found (looked in ", join(looked, ", "),
                           "); install one or set CUDA_HOME"));
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

}  // namespace kiln::toolchain
