// The backends kiln builds with, in one table: what each is and what it asks of the rest of kiln
// (resolve, pins, the pipeline, the CLI read these traits; compile/ holds each one's build, found
// by the row's name). A manifest points at its row.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace kiln::manifest {

struct BackendSpec {
  std::string_view name;  // as manifests and --backend spell it
  // Compiles extension modules: needs the target's toolchain (Python, CUDA, C++ compiler, torch),
  // whose identities, the arch set and the manylinux floor join its build key; its wheels carry
  // the +cuXYtorchM.m label and pin torch.
  bool compiles;
  // Builds inside a pinned environment (the setuptools backend's pins join the key).
  bool needs_build_env;
  // Compiles a manifest's [[build.extension]] itself: it needs at least one, and the shard counts
  // of shardable sources join the key.
  bool builds_extensions;
  // Ships build.packages as they are: it needs at least one and takes no extensions.
  bool ships_packages_only;
};

// Every backend, in the order help texts list them.
std::span<const BackendSpec> backends();
// The first row (native): a manifest's backend until its [build] names one.
const BackendSpec& default_backend();
// nullptr for a name no backend has.
const BackendSpec* backend_named(std::string_view name);
// "native, setuptools or pure".
std::string backend_names();

}  // namespace kiln::manifest
