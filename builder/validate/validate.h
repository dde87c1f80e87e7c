// Static wheel validation: the checks `kiln validate` runs and `kiln build` runs before a wheel is
// committed — archive, metadata, tags, ELF, torch ABI, GPU code — each with an id, a verdict and a
// one-line message; and the reports (text, JSON, JUnit XML).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "core/sandbox.h"
#include "manifest/arch.h"
#include "packaging/wheel_name.h"
#include "toolchain/torch.h"
#include "wheel/provenance.h"
#include "wheel/upstream.h"

namespace kiln::validate {

// Fail makes validation fail; Warn reports something worth knowing that does not; Skip says a
// check had nothing to look at or no reference to compare with.
enum class Verdict { Pass, Warn, Skip, Fail };
std::string verdict_name(Verdict verdict);  // "pass", "warn", "skip", "fail"

struct CheckResult {
  std::string
      id;  // "archive", "metadata", "tags", "elf", "torch-abi", "gpu-code", "gpu-target", "import"
  Verdict verdict = Verdict::Pass;
  std::string message;                             // one line
  std::vector<std::string> details;                // one problem or fact per line
  nlohmann::json data = nlohmann::json::object();  // machine-readable facts (--json)
};

struct Report {
  std::filesystem::path wheel;
  std::vector<CheckResult> checks;
  bool ok() const;  // no check failed
  const CheckResult* find(const std::string& id) const;
};

struct Options {
  // The archs the wheel must hold code for; when absent, those its provenance (kiln.json) records.
  std::optional<manifest::ArchList> archs;
  // Where `archs` came from, for messages. "--archs" holds every wheel to them; a target's archs
  // ("target NAME") apply only to wheels with binaries (a pure wheel built for a target is fine).
  std::string archs_from = "--archs";
  // A GPU to judge (`--gpu sm_120`): adds the "gpu-target" check.
  std::optional<manifest::Arch> gpu;
  // The newest CUDA the GPU host's driver supports ("13.0"): adds "ptx-jit", and "gpu-target"
  // counts only PTX the driver can JIT-compile.
  std::string driver_cuda;
  // The torch whose libraries must define the extension's symbols; without one "torch-abi" skips.
  std::optional<toolchain::TorchSysroot> torch;
  std::string torch_note;     // why this torch (e.g. "target torch2.10-cu128"), shown in messages
  std::string torch_problem;  // when no torch could be had: the reason, shown by the skip
  // Where to find the CUDA runtime and the C/C++ runtime libraries; empty: default_library_dirs().
  std::vector<std::filesystem::path> library_dirs;
  // A Python (with torch) to import the wheel's modules with: adds the "import" check, which runs
  // in the build's sandbox (core/sandbox.h: the Python, its paths and the wheel read-only, no
  // network, nobody) as `sandbox` says.
  std::string import_with;
  SandboxMode sandbox = SandboxMode::Auto;
  // The sdist's own metadata (from the download cache, through the provenance): "metadata"
  // reports how the wheel's differs beyond what kiln adds. Absent: the comparison is skipped
  // with `upstream_note` as the reason.
  std::optional<wheel::UpstreamMetadata> upstream;
  std::string upstream_note;
};

// $CUDA_HOME/lib64, /usr/local/cuda/lib64 and the system's library directories.
std::vector<std::filesystem::path> default_library_dirs();

// What a caller needs before validating (e.g. to pick a torch): the name and kiln.json, if any.
struct WheelSummary {
  packaging::WheelFileName name;
  std::optional<wheel::Provenance> provenance;  // absent when the wheel has no readable kiln.json
  std::string provenance_error;                 // why its kiln.json does not read ("" if it does)
};
// Fails (bad input) only when the path is not a readable file with a wheel's name.
Expected<WheelSummary> summarize(const std::filesystem::path& wheel);

// Runs every check. Fails (bad input) when the path is not a file with a wheel's name; a corrupt
// archive is a failed "archive" check (and the checks that need its contents skip).
Expected<Report> validate_wheel(const std::filesystem::path& wheel, const Options& options);

// An installed distribution: the dist-info directory `dist_info` ("name-1.0.dist-info") of the
// site directory `site`. Its RECORD names the files; the ELF files among them are read, each opened
// from `site` one directory at a time without following links (nothing outside `site`), with caps.
// Checks "installed" (RECORD, the files read, their hashes), "torch-abi", "gpu-code", a
// "gpu-target" per GPU of `gpus`, and "ptx-jit" when options.driver_cuda is set. Fails (bad input)
// when `dist_info` is not a dist-info directory name or `site` has no such directory.
Expected<Report> validate_installed(const std::filesystem::path& site, const std::string& dist_info,
                                    const Options& options,
                                    const std::vector<manifest::Arch>& gpus);

// The *.whl files under a directory (recursively, sorted), or the file itself.
Expected<std::vector<std::filesystem::path>> find_wheels(const std::filesystem::path& path);

// Renderings: a block of lines per wheel, a JSON document, JUnit XML.
std::string render_text(const Report& report, bool verbose);
nlohmann::json render_json(const std::vector<Report>& reports);
std::string render_junit(const std::vector<Report>& reports);

}  // namespace kiln::validate
