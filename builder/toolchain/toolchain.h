// What a compiled package is built with for one target: its Python, CUDA toolkit, host compiler
// and torch, prepared once per target by the pipeline.
#pragma once

#include <filesystem>

#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/host.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"

namespace kiln::toolchain {

struct Toolchain {
  PythonInfo python;
  CudaToolkit cuda;
  HostCompiler cxx;
  TorchSysroot torch;
  std::filesystem::path torch_wheel;  // the pinned wheel (empty for a torch from an environment)
  HostFacts host;                     // the linker, C library and CUDA headers it builds with
};

}  // namespace kiln::toolchain
