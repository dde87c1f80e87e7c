#include "compile/sandbox.h"

#include <algorithm>

#include "compile/backend.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// The system directories the sandbox always holds (read-only).
constexpr const char* kSystem[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"};

bool in_system(const fs::path& path) {
  for (const char* name : kSystem) {
    const fs::path dir(name);
    auto [end, _] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
    if (end == dir.end()) return true;
  }
  return false;
}

fs::path real(const fs::path& path) {
  std::error_code ec;
  fs::path r = fs::canonical(path, ec);
  return ec ? path : r;
}

// What the host compiler needs beyond the system: its installation when it lives elsewhere
// (<prefix>/bin/g++: the prefix, with its libexec and headers). A ccache wrapper would write to
// its own cache, outside the sandbox: refused, naming the way out.
Expected<std::vector<fs::path>> compiler_paths(const toolchain::HostCompiler& cxx) {
  fs::path path = real(cxx.path);
  if (path.filename() == "ccache" || path.filename() == "sccache")
    return Error::bad_input(
        cat("the host compiler ", cxx.path, " is ", path.filename().string(),
            "'s wrapper, which would write its cache from inside the build's sandbox: name the "
            "compiler itself in the target's [compiler] cxx (or build with KILN_SANDBOX=off)"));
  if (in_system(path)) return std::vector<fs::path>{};
  return std::vector<fs::path>{path.parent_path().parent_path()};
}

// The limits of each sandboxed step: $KILN_MAX_PROCESSES (a count) and $KILN_MAX_FILE_SIZE
// (parse_byte_size's form) over SandboxLimits' defaults.
Expected<SandboxLimits> sandbox_limits() {
  SandboxLimits limits;
  if (std::string text = env_value("KILN_MAX_PROCESSES"); !text.empty()) {
    auto n = parse_byte_size(text);
    if (text.find_first_not_of("0123456789") != std::string::npos || !n || *n < 16 || *n > 1000000)
      return Error::bad_input(cat("KILN_MAX_PROCESSES=", printable_excerpt(text, 40),
                                  ": expected a number of processes from 16 to 1000000"));
    limits.processes = *n;
  }
  if (std::string text = env_value("KILN_MAX_FILE_SIZE"); !text.empty()) {
    auto n = parse_byte_size(text);
    if (!n || *n < (std::uint64_t(1) << 20))
      return Error::bad_input(cat("KILN_MAX_FILE_SIZE=", printable_excerpt(text, 40),
                                  ": expected a size of at least 1M (e.g. 512M, 64G)"));
    limits.file_size = *n;
  }
  return limits;
}

}  // namespace

bool will_sandbox(SandboxMode mode) {
  return mode != SandboxMode::Off && sandbox_available().has_value();
}

Expected<BuildSandbox> build_sandbox(const CompileBasics& b, const fs::path& torch_root,
                                     const std::vector<fs::path>& extra) {
  BuildSandbox out;
  if (b.sandbox == SandboxMode::Off) {
    out.caveat = cat(kNotSandboxed, ": KILN_SANDBOX=off");
    return out;
  }
  if (const auto& available = sandbox_available(); !available) {
    if (b.sandbox == SandboxMode::Required)
      return Error::failed(cat("the build's sandbox cannot be made here (",
                               available.error().message,
                               "), and KILN_SANDBOX=required: kiln does not run ", b.manifest->name,
                               "'s code without it"));
    out.caveat = cat(kNotSandboxed, ": ", available.error().message);
    static const bool warned = (log::warn(cat("builds run unsandboxed: ", out.caveat,
                                              " (KILN_SANDBOX=required makes this an error)")),
                                true);
    (void)warned;
    return out;
  }
  KILN_TRY(std::vector<fs::path> compiler, compiler_paths(b.cxx));
  SandboxSpec spec;
  spec.writable = {b.root};
  // The job logs kiln writes and reads back stay kiln's: read-only inside (a mount point, which no
  // step can rename or replace with a link for kiln to write or read through).
  KILN_CHECK(ensure_directory(b.root / "logs"));
  spec.read_only.push_back(b.root / "logs");
  std::vector<fs::path> ro = {b.cuda.home, torch_root, b.python.include_dir};
  ro.insert(ro.end(), compiler.begin(), compiler.end());
  ro.insert(ro.end(), extra.begin(), extra.end());
  // As the tools are given them (the sandbox binds their real paths, and makes the links on the
  // way again), each once; what the system directories hold is there already.
  for (const auto& p : ro) {
    if (p.empty() || (in_system(p) && in_system(real(p)))) continue;
    if (std::find(spec.read_only.begin(), spec.read_only.end(), p) == spec.read_only.end())
      spec.read_only.push_back(p);
  }
  spec.keep_env = {"PATH", "LANG", "LC_ALL", "SOURCE_DATE_EPOCH"};
  KILN_TRY(spec.limits, sandbox_limits());
  out.spec = std::move(spec);
  return out;
}

}  // namespace kiln::compile
