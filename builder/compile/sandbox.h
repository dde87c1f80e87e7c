// The sandbox of one build (core/sandbox.h): what the processes of a compiling backend see. Its
// build root writable; read-only the system, the CUDA toolkit, the torch headers and libraries,
// the Python headers, a host compiler that lives outside the system directories, and what the
// backend adds (the setuptools backend: its environment and the interpreter it was made from).
// Where the kernel or a container denies the namespaces, a build runs unsandboxed and says so in
// its caveats, unless the sandbox is required (docs/reliability.md, "The sandbox").
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "core/sandbox.h"
#include "wheel/provenance.h"

namespace kiln::compile {

struct CompileBasics;

// The caveat of a build that did not run sandboxed (wheel/provenance.h, which kiln.json's readers
// share).
using wheel::kNotSandboxed;
using wheel::says_not_sandboxed;

// Whether the compiling backends' processes run sandboxed in `mode` here (the probe, once).
bool will_sandbox(SandboxMode mode);

struct BuildSandbox {
  std::optional<SandboxSpec> spec;  // nullopt: not sandboxed, and `caveat` says why
  std::string caveat;
};

// The sandbox of a build of `b`, with `torch_root` and `extra` read-only too. A required sandbox
// that cannot be made, or a host compiler the sandbox cannot hold (a ccache wrapper), is an error.
Expected<BuildSandbox> build_sandbox(const CompileBasics& b,
                                     const std::filesystem::path& torch_root,
                                     const std::vector<std::filesystem::path>& extra);

}  // namespace kiln::compile
