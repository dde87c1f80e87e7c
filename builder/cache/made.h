// What the cache makes once and then only reads: CUDA toolkits laid out from pinned files
// (toolkits/), torch unpacked from its pinned wheel (sysroots/), the setuptools backend's build
// environments (envs/). Each is a directory named after the hash of what it is made from, whole
// once its marker file is there; Store::ensure makes it, and is the one place that does: under
// <folder>/<name>.lock beside it (so caches that share the folder through a link share the lock),
// in a staging directory beside it (".<name>.tmp-XXXXXX", so the rename never crosses a mount even
// when the folder is a link to another one), renamed into place when its maker is done and the
// marker is there.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln::cache {

// A toolkit's marker: what it was laid out from (toolchain's toolkit makers write it).
inline constexpr const char* kToolkitMarker = "kiln-toolkit.json";

struct MadeOnce {
  std::string folder;  // "toolkits", "sysroots", "envs"
  std::string name;    // the directory's name in it
  std::string marker;  // relative to the directory: there only once it is whole
  std::string what;    // for the log: "the CUDA 13.0 toolkit from 9 wheels"
};

// A CUDA toolkit laid out from NVIDIA's wheels of CUDA `version`, `pins_sha256` the hash of its
// pinned set (toolchain::toolkit_pins_sha256): toolkits/cuda-<version>-<pins[0:16]>.
MadeOnce wheel_toolkit(std::string_view version, std::string_view pins_sha256);
// One laid out from Debian's packages of CUDA `release` ("unknown" when the pins name none):
// toolkits/cuda-<release>-debian-<pins[0:16]>.
MadeOnce debian_toolkit(std::string_view release, std::string_view pins_sha256);
// torch unpacked from the pinned wheel `wheel_sha256`: sysroots/torch-<sha256[0:16]> (its torch/
// is the torch package directory).
MadeOnce torch_sysroot(std::string_view wheel_sha256);
// The setuptools backend's environment whose identity (python, torch, pins) hashes to
// `identity_sha256`: envs/setuptools-<identity_sha256[0:16]>.
MadeOnce setuptools_env(std::string_view identity_sha256);

// Fills `dir` (empty, made for it) and writes the marker last; may use `scratch` (empty too,
// removed afterwards) for anything else. Runs under the made-once lock.
using Maker = std::function<Expected<void>(const std::filesystem::path& dir,
                                           const std::filesystem::path& scratch)>;

}  // namespace kiln::cache
