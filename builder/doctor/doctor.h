// `kiln doctor`: what a GPU host has and needs for transformers' Gated DeltaNet fast path. The
// Python half (doctor.py, built into kiln and served by `kiln serve` at /doctor.py) runs with the
// host's interpreter and reports the interpreter, torch, Triton, transformers, the driver and GPUs,
// the kernel packages' imports and the next commands as JSON; this half adds what kiln checks
// statically: the installed causal-conv1d's and kiln-built wheels' shared objects against these
// GPUs (gpu-target, ptx-jit) and this torch (torch-abi), under the report's "kiln" key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/arch.h"

namespace kiln::doctor {

// doctor.py's text.
std::string_view script();

struct Options {
  std::string python = "python3";  // the interpreter of the environment to examine
  std::string libcuda;             // the driver library to load instead of libcuda.so.1 (tests)
  std::string server;              // kiln serve's URL, for the install command ("" : doctor.py's)
  int timeout_s = 300;             // for doctor.py's import checks
};

// The interpreter `--python NAME` means. A name is looked up on PATH, skipping the directory of
// kiln's own executable when kiln lives in a virtual environment without torch (`uvx --from`,
// `uv tool install`, pipx put their venv's bin first on PATH, and its python3 is not the user's).
// A path, or a name found nowhere else, is returned as given.
std::string resolve_python(const std::string& name);

// The most bytes of doctor.py's output read back.
inline constexpr std::size_t kMaxReportBytes = 16u << 20;

// Runs doctor.py --json with the interpreter (argv vector, output capped); its report. Fails (bad
// input) when the interpreter cannot be run, (failed) when the report does not read.
Expected<nlohmann::json> run_script(const Options& options);

// The GPUs of a report ("gpus": [{"cc": "9.0"}...]) as archs; GPUs whose "cc" does not read are
// left out.
std::vector<manifest::Arch> report_gpus(const nlohmann::json& report);

// What kiln adds under "kiln": the static checks of the installed binaries, the fast path with
// their verdicts, "ok". `python` is the interpreter whose torch the torch-abi check uses.
nlohmann::json static_checks(const nlohmann::json& report, const std::string& python);

// The human report: doctor.py's summary rows, a row per checked distribution, the fast path line
// ("fast path: active" / "fast path: missing (reasons)") and, when missing, the next commands.
std::string render_text(const nlohmann::json& report);

}  // namespace kiln::doctor
