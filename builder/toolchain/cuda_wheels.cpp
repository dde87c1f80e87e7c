// A CUDA toolkit from NVIDIA's wheels (nvidia-cuda-nvcc, -crt, nvidia-nvvm, -cuda-runtime,
// -cuda-cccl, ...): each wheel keeps its part under nvidia/<component>/ (nvidia/cu13/ for CUDA 13,
// nvidia/cuda_nvcc/, nvidia/cuda_runtime/, ... for CUDA 12); merged, they are a toolkit tree whose
// own bin/nvcc.profile finds cicc, ptxas, fatbinary, nvlink, the headers and CCCL relative to nvcc.
#include <algorithm>

#include "archive/unpack.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/toolkit.h"
#include "toolchain/cuda.h"
#include "toolchain/toolkit_dir.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

// What nvcc needs to compile and what kiln links against, relative to the toolkit root.
// Beyond what every toolkit needs (toolkit_dir.h's missing_files).
const std::vector<std::string> kWheelFiles = {"lib/libcudart.so"};

Expected<void> same_content(const fs::path& a, const fs::path& b, const std::string& rel) {
  KILN_TRY(std::string x, sha256_file(a));
  KILN_TRY(std::string y, sha256_file(b));
  if (x != y)
    return Error::bad_input(cat("two of the pinned CUDA wheels hold different files at ", rel));
  return {};
}

// Moves the files of one unpacked wheel (nvidia/<component>/...) into the toolkit tree.
Expected<void> merge_wheel(const fs::path& unpacked, const fs::path& root,
                           const std::string& wheel_name) {
  fs::path nvidia = unpacked / "nvidia";
  std::error_code ec;
  if (!fs::is_directory(nvidia, ec))
    return Error::bad_input(
        cat(wheel_name, " is not an NVIDIA CUDA component wheel (no nvidia/ directory)"));
  for (const auto& component : fs::directory_iterator(nvidia, ec)) {
    if (!component.is_directory() || component.is_symlink()) continue;  // nvidia/__init__.py
    for (auto it = fs::recursive_directory_iterator(component.path(), ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      // Lexically: fs::relative would resolve a link to what it names.
      fs::path rel = it->path().lexically_relative(component.path());
      std::string rel_s = rel.generic_string();
      // Python packaging and NVIDIA's build metadata are not part of the toolkit.
      if (rel_s.rfind(".metadata", 0) == 0 || rel.filename() == "__init__.py" ||
          rel.filename() == "__pycache__") {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      fs::path to = root / rel;
      if (it->is_directory() && !it->is_symlink()) {
        KILN_CHECK(ensure_directory(to));
        continue;
      }
      if (present(to)) {
        KILN_CHECK(same_content(it->path(), to, rel_s));
        continue;
      }
      KILN_CHECK(ensure_directory(to.parent_path()));
      fs::rename(it->path(), to, ec);
      if (ec) return Error::failed(cat("cannot move ", rel_s, " into the toolkit: ", ec.message()));
    }
    if (ec) return Error::failed(cat("cannot read the unpacked ", wheel_name, ": ", ec.message()));
  }
  return {};
}

// The links an installed toolkit has and the wheels lack: lib64 and
// targets/x86_64-linux/{include,lib} (so nvcc's own include paths read like an installed
// toolkit's), and the libcudart.so linker name.
Expected<void> lay_out_wheels(const fs::path& root) {
  std::error_code ec;
  if (fs::is_directory(root / "lib", ec)) {
    KILN_CHECK(link_once("lib", root / "lib64", true));
    std::vector<std::string> cudarts;
    for (const auto& e : fs::directory_iterator(root / "lib", ec))
      if (e.path().filename().string().rfind("libcudart.so.", 0) == 0)
        cudarts.push_back(e.path().filename().string());
    std::sort(cudarts.begin(), cudarts.end());
    if (!cudarts.empty())
      KILN_CHECK(link_once(cudarts.front(), root / "lib" / "libcudart.so", false));
  }
  return link_targets(root, "lib");
}

// The pins as the identity and the marker record them.
nlohmann::json wheels_json(const CudaRequest& request) {
  nlohmann::json wheels = nlohmann::json::array();
  for (const auto& w : request.wheels) wheels.push_back({{"file", w.file}, {"sha256", w.sha256}});
  return wheels;
}

Expected<CudaToolkit> open_wheels_toolkit(const fs::path& root, const std::string& wanted) {
  KILN_TRY(CudaToolkit t, run_nvcc(root));
  if (t.version != wanted)
    return Error::bad_input(cat("the pinned CUDA wheels hold nvcc ",
                                t.version.empty() ? "of an unknown release" : t.version,
                                ", but the target asks for CUDA ", wanted,
                                ": pin the wheels of CUDA ", wanted));
  return t;
}

// One wheel's nvidia/ tree, unpacked into `unpacked` and merged into `root`.
Expected<void> unpack_wheel(const fs::path& wheel, const fs::path& unpacked, const fs::path& root) {
  archive::UnpackOptions options;
  options.filter = [](std::string_view path) { return path.rfind("nvidia/", 0) == 0; };
  auto done = archive::unpack(wheel, unpacked, options);
  if (!done)
    return Error{done.error().kind,
                 cat("cannot unpack ", wheel.filename().string(), ": ", done.error().message), ""};
  return merge_wheel(unpacked, root, wheel.filename().string());
}

// Fills `root` from the wheels (unpacked one by one in `scratch`); what the marker records.
Expected<nlohmann::json> fill_from_wheels(const CudaRequest& request,
                                          const std::vector<fs::path>& wheels, const fs::path& root,
                                          const fs::path& scratch) {
  KILN_CHECK(merge_each(wheels, scratch, "w", [&](const fs::path& wheel, const fs::path& unpacked) {
    return unpack_wheel(wheel, unpacked, root);
  }));
  KILN_CHECK(lay_out_wheels(root));
  std::vector<std::string> missing = missing_files(root, kWheelFiles);
  bool cccl = present(root / "include" / "cccl" / "cuda" / "std" / "version") ||
              present(root / "include" / "cuda" / "std" / "version");
  if (!cccl) missing.push_back("include/[cccl/]cuda/std/version (CCCL)");
  if (!missing.empty()) {
    std::string why;
    if (std::find(missing.begin(), missing.end(), "bin/nvcc") != missing.end() &&
        request.version.rfind("12.", 0) == 0)
      why =
          "; NVIDIA's CUDA 12 wheels on PyPI carry no compiler (nvidia-cuda-nvcc-cu12 holds ptxas, "
          "libnvvm and the crt "
          "headers only; nvcc, cudafe++, cicc, fatbinary and nvlink ship as wheels from CUDA 13.0 "
          "on): build this target "
          "with toolkit = \"system\" and a CUDA 12 toolkit";
    return Error::bad_input(cat("the pinned CUDA ", request.version,
                                " wheels make no complete toolkit: missing ", join(missing, ", "),
                                why));
  }
  KILN_TRY(CudaToolkit t,
           open_wheels_toolkit(root, request.version));  // checked before it is renamed in
  return nlohmann::json{
      {"version", t.version}, {"nvcc_version", t.version_text}, {"wheels", wheels_json(request)}};
}

}  // namespace

cache::MadeOnce wheel_toolkit_of(const CudaRequest& request) {
  return cache::wheel_toolkit(request.version, toolkit_pins_sha256(request.wheels));
}

Expected<CudaToolkit> cuda_from_wheels(const CudaRequest& request,
                                       const std::vector<fs::path>& wheels,
                                       const cache::Store& cache) {
  if (wheels.size() != request.wheels.size() || wheels.empty())
    return Error::bad_input(
        cat("the CUDA ", request.version, " wheel toolkit needs its pinned wheels"));
  return ensure_toolkit(
      cache, wheel_toolkit_of(request),
      {[&](const fs::path& root) { return open_wheels_toolkit(root, request.version); },
       [&](const fs::path& root, const fs::path& scratch) {
         return fill_from_wheels(request, wheels, root, scratch);
       },
       cat("the CUDA ", request.version, " toolkit from ", wheels.size(), " wheels")});
}

std::unique_ptr<CudaSource> wheels_cuda_source(const CudaRequest& request,
                                               const cache::Store* cache, FetchPinned fetch) {
  PinnedToolkit toolkit{request.wheels, "the wheel toolkit has no way to fetch its wheels",
                        cat("CUDA ", request.version, " toolkit: ")};
  toolkit.identity = [request]() -> Expected<nlohmann::json> {
    return nlohmann::json{{"toolkit", manifest::toolkit_name(manifest::ToolkitKind::Wheels)},
                          {"version", request.version},
                          {"wheels", wheels_json(request)}};
  };
  toolkit.made = [request](const std::vector<fs::path>& files, const cache::Store& cache) {
    return cuda_from_wheels(request, files, cache);
  };
  return pinned_toolkit_source(std::move(toolkit), cache, std::move(fetch));
}

}  // namespace kiln::toolchain
