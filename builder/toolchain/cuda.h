// The CUDA toolkit: where it is and which version its nvcc is.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::toolchain {

struct CudaToolkit {
  std::filesystem::path home;  // CUDA_HOME
  std::filesystem::path nvcc;
  std::string version;       // "13.0"
  std::string version_text;  // nvcc --version, whole

  int major() const;
  nlohmann::json identity() const;
};

// Looks in `home_hint` (the target's), $CUDA_HOME, $CUDA_PATH, nvcc on PATH, /usr/local/cuda.
Expected<CudaToolkit> detect_cuda(const std::string& home_hint);
// "Cuda compilation tools, release 13.0, V13.0.88" -> "13.0"
std::string parse_nvcc_release(const std::string& version_text);
// Fails, naming the toolkit needed, when the majors differ.
Expected<void> check_cuda_matches(const CudaToolkit& toolkit, const std::string& wanted_version,
                                  const std::string& wanted_by);

}  // namespace kiln::toolchain
