// The system's CUDA toolkit: found where CUDA_HOME, nvcc on PATH or the usual place say.
#include <cstdlib>
#include <optional>

#include "core/process.h"
#include "core/strings.h"
#include "manifest/toolkit.h"
#include "toolchain/cuda.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

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
    // A toolkit has its headers beside bin/ (an nvcc on PATH may be a wrapper script elsewhere).
    if (!fs::exists(home / "include" / "cuda_runtime.h", ec)) continue;
    auto text = run_capture({nvcc.string(), "--version"});
    if (!text) return Error::failed(cat("cannot run ", nvcc.string(), ": ", text.error().message));
    CudaToolkit t{home, nvcc, parse_nvcc_release(*text), *text};
    if (t.version.empty())
      return Error::failed(cat("cannot read the CUDA release from ", nvcc.string(), " --version"));
    return t;
  }
  return Error::failed(
      cat("no CUDA toolkit found (looked in ", join(looked, ", "),
          "); install one, set CUDA_HOME, or use a target with cuda.toolkit = \"wheels\""));
}

namespace {

class SystemSource : public CudaSource {
 public:
  explicit SystemSource(CudaRequest request) : request_(std::move(request)) {}

  Expected<nlohmann::json> identity() override {
    KILN_TRY(CudaToolkit t, toolkit());
    nlohmann::json id = t.identity();
    id["toolkit"] = manifest::toolkit_name(manifest::ToolkitKind::System);
    return id;
  }

  Expected<CudaToolkit> toolkit() override {
    if (!found_) {
      KILN_TRY(CudaToolkit t, detect_cuda(request_.home));
      found_ = std::move(t);
    }
    return *found_;
  }

 private:
  CudaRequest request_;
  std::optional<CudaToolkit> found_;
};

}  // namespace

std::unique_ptr<CudaSource> system_cuda_source(const CudaRequest& request) {
  return std::make_unique<SystemSource>(request);
}

}  // namespace kiln::toolchain
