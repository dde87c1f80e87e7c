// What `kiln validate` checks a wheel against besides the wheel itself: the torch (a target's, or
// the pinned one its provenance names, fetched once and unpacked into the cache's sysroots) and the
// CUDA runtime of a toolkit from wheels that the cache holds.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cache/store.h"
#include "core/expected.h"
#include "manifest/repository.h"
#include "manifest/target.h"
#include "pipeline/sources.h"
#include "toolchain/torch.h"
#include "validate/validate.h"

namespace kiln::pipeline {

// The target under the manifests directory that pins torch `version` ("2.10.0") from PyPI.
Expected<manifest::Target> target_for_torch(const manifest::Repository& repo,
                                            const std::string& version);

// The metadata an sdist says of itself: its PKG-INFO and egg-info entry points, unpacked alone
// (safely, bounded) into a staging directory of `store`.
Expected<wheel::UpstreamMetadata> read_sdist_metadata(const std::filesystem::path& sdist,
                                                      const cache::Store& store);

class ValidateInputs {
 public:
  // `target`: --target, or the target found for --torch-version (failing to get its torch is then
  // an error); without one, a compiled wheel is checked against the torch its provenance pins.
  ValidateInputs(std::filesystem::path cache, bool offline, std::string index_url,
                 std::optional<manifest::Target> target);

  // `base` for one wheel: its torch (or why there is none) and, for a wheel built with a CUDA
  // toolkit from wheels that the cache holds, that toolkit's lib/ first among the library dirs.
  Expected<validate::Options> options_for(const validate::WheelSummary& summary,
                                          validate::Options base);

 private:
  // `index_url` "": the configured index (a target's `[torch] index-url` otherwise).
  Expected<toolchain::TorchSysroot> pinned(const std::string& file, const std::string& sha256,
                                           const std::string& index_url = "");
  Expected<void> choose_torch(const validate::WheelSummary& summary, validate::Options& options);
  void add_wheel_toolkit(const validate::WheelSummary& summary, validate::Options& options) const;
  void add_upstream(const validate::WheelSummary& summary, validate::Options& options) const;

  cache::Store store_;
  bool offline_;
  std::string index_url_;
  std::optional<manifest::Target> target_;
  std::unique_ptr<Fetching> fetching_;
  std::map<std::string, toolchain::TorchSysroot> sysroots_;  // by the torch wheel's sha256
};

}  // namespace kiln::pipeline
