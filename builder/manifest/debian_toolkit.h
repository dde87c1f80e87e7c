// The pinned Debian packages of a CUDA 12 toolkit: manifests/tools/cuda12-debian.toml, built into
// kiln (like tools/setuptools-env.toml), for whatever writes a target's [[cuda.deb]] tables
// (`kiln target init --toolkit debian`).
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "manifest/target.h"

namespace kiln::manifest {

struct DebianToolkitPins {
  std::string display_path;
  std::string release;  // "12.4": the nvcc the packages hold
  std::string suite;    // "trixie": the Debian release they were pinned from
  std::vector<CudaDeb> debs;
};

// Strict like a target: unknown keys, types, pool paths, sha256s, a package twice.
Expected<DebianToolkitPins> parse_debian_toolkit(const std::string& text,
                                                 const std::string& display_path);
// The built-in copy of tools/cuda12-debian.toml.
Expected<DebianToolkitPins> builtin_debian_toolkit();
// The TOML of a target's [cuda] table for these pins and torch's CUDA `version` ("12.8").
std::string debian_cuda_table(const DebianToolkitPins& pins, const std::string& version);

// The text of manifests/tools/cuda12-debian.toml as it was when kiln was built.
extern const char* const kEmbeddedDebianToolkit;

}  // namespace kiln::manifest
