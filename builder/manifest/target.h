// Build targets: manifests/targets/<name>.toml. A target is a (Python, torch, CUDA, host
// compiler, archs) tuple; docs/manifest.md documents the format.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/arch.h"
#include "manifest/toolkit.h"

namespace kiln::manifest {

struct TorchWheel {
  std::string python_tag;  // "cp311"
  std::string file;        // "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
  std::string sha256;
};

// A pinned wheel of NVIDIA's CUDA components (nvcc, headers, runtime) on the package index.
struct CudaWheel {
  std::string
      file;  // "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
  std::string sha256;
  std::string project() const;  // "nvidia-cuda-nvcc", from the file name
};

// A pinned package of a toolkit from Debian's archive, by its path in the archive's pool (the
// mirror comes from apt's configuration on the machine, fetch/debian_mirror.h).
struct CudaDeb {
  std::string
      path;  // "pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb"
  std::string sha256;
  std::string file() const;     // the path's last component
  std::string package() const;  // "nvidia-cuda-toolkit": the file name up to its first '_'
};

struct Target {
  std::string name;  // file stem, or "<stem>-<archs slug>" for an --archs override
  std::string display_path;
  std::string description;

  // Python: an interpreter command or path, or a version ("3.11" -> python3.11 on PATH).
  std::string python_interpreter;
  std::string python_version;

  // torch: a pinned PyPI wheel per Python tag, or the torch of the Python environment.
  enum class TorchSource { Pypi, Environment };
  TorchSource torch_source = TorchSource::Pypi;
  std::string torch_version;
  std::vector<TorchWheel> torch_wheels;
  // Where the pinned wheels are fetched from ([torch] index-url, e.g. PyTorch's cu128 index);
  // empty: the configured index (--index-url, $PIP_INDEX_URL, pip's config). Not a key input:
  // the sha256 pins the bytes wherever they come from.
  std::string torch_index_url;

  // CUDA: System (detect), Wheels (a toolkit from pinned PyPI wheels) or Debian (from pinned
  // Debian packages).
  ToolkitKind cuda_toolkit = ToolkitKind::System;
  std::string cuda_version;            // "13.0": what torch was built with
  std::string cuda_home;               // optional, with the system toolkit
  std::vector<CudaWheel> cuda_wheels;  // with the wheels toolkit
  std::vector<CudaDeb> cuda_debs;      // with the debian toolkit

  std::string cxx = "g++";
  ArchList archs;
  // The glibc minor of the compiled wheels' manylinux floor ([target] manylinux = "2_28"); -1:
  // the pinned torch wheel's own, or the environment torch's (resolve::ResolvedTarget::manylinux).
  int manylinux = -1;

  // The interpreter kiln runs: the explicit one, else python<version>.
  std::string interpreter() const;
  // torch's major.minor ("2.11"), from torch_version.
  std::string torch_minor() const;
  nlohmann::json canonical() const;  // the declared inputs, for build keys
};

Expected<Target> parse_target(const std::string& text, const std::string& name,
                              const std::string& display_path);
Expected<Target> load_target(const std::filesystem::path& file, const std::string& display_path);
// The same target with other archs, named "<name>-<slug>" so two arch sets never share a name.
Target with_archs(const Target& target, const ArchList& archs);

bool is_valid_target_name(std::string_view name);  // [a-z0-9][a-z0-9._-]*
// The forms of a target's fields, each decided in one pass: a Python version ("3.11"), a CPython
// tag ("cp311", "cp313t"), a CUDA version ("13.0"). (A wheel's file name: packaging/wheel_name.h.)
bool is_python_version(std::string_view version);
// A torch version as an index names it: a public PEP 440 version with an optional local label
// ("2.11.0+cu128").
bool is_torch_version(std::string_view version);
// An http:// or https:// URL of printable ASCII without spaces, quotes, backslashes or angle
// brackets (safe to write into a TOML string and a log line as it is).
bool is_index_url(std::string_view url);
bool is_cpython_tag(std::string_view tag);
bool is_cuda_version(std::string_view version);
// A path in a Debian archive's pool: relative, "pool/" first, no "." or ".." component or empty
// one, only [A-Za-z0-9.+~_/-], ending in ".deb", at most kMaxPoolPathBytes. Else "" and `why`.
bool is_debian_pool_path(std::string_view path, std::string& why);
constexpr std::size_t kMaxPoolPathBytes = 255;
// The glibc minor of a manylinux platform tag (manylinux_2_28_x86_64 -> 28, as large as an int
// holds; manylinux1/2010/2014 -> 5/12/17) with its architecture in `arch`, or -1 when it is none.
int manylinux_minor(std::string_view tag, std::string& arch);
// The lowest glibc minor a wheel file name's platform tags name ("...-manylinux_2_28_x86_64.whl"
// -> 28), or -1 when it names no manylinux tag.
int wheel_manylinux_floor(std::string_view wheel_file);

}  // namespace kiln::manifest
