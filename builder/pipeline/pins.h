// The files a target pins besides the packages' own sources, fetched from the package index: its
// torch wheel, the wheels of a toolkit from wheels, the setuptools backend's environment. One list,
// used by the build (prepare_toolchain, a backend's prepare) and by `kiln fetch --target`.
#pragma once

#include <string>
#include <vector>

#include "core/expected.h"
#include "manifest/build_env.h"
#include "manifest/target.h"
#include "pipeline/sources.h"
#include "resolve/plan.h"

namespace kiln::pipeline {

// A file on the package index, pinned by sha256; or, with a pool path, a Debian package from the
// mirror apt uses (fetch/debian_mirror.h).
struct PinnedFile {
  std::string project, file, sha256;
  std::string pool_path;  // "pool/non-free/n/...deb": a Debian toolkit's package
  std::string index_url;  // where to look for it; "" for the configured index
};

// One file of the target's CUDA toolkit: a wheel (`file` its name), or for a toolkit from Debian's
// archive a package (`file` its pool path).
PinnedFile cuda_pin(const manifest::Target& target, const std::string& file,
                    const std::string& sha256);

// The target's pinned torch wheel for the Python ABI `abi_tag` ("cp312").
Expected<manifest::TorchWheel> torch_wheel_for(const manifest::Target& target,
                                               const std::string& abi_tag);

// Every file a build of the plan's items for `rt` fetches from the index: the toolkit's wheels
// (a toolkit from wheels) or packages (a toolkit from Debian's archive), the torch wheel (a pinned
// torch) for compiled packages, and the build environment's wheels for setuptools ones. Sorted,
// each once.
Expected<std::vector<PinnedFile>> pinned_files(const resolve::Plan& plan,
                                               const resolve::ResolvedTarget& rt);

// Fetches one into the download cache (verified), as the build does.
Expected<fetch::Fetched> fetch_pinned(Fetching& fetching, const PinnedFile& file);

}  // namespace kiln::pipeline
