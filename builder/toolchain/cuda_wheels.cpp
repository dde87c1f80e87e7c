// A CUDA toolkit from NVIDIA's wheels (nvidia-cuda-nvcc, -crt, nvidia-nvvm, -cuda-runtime,
// -cuda-cccl, ...): each wheel keeps its part under nvidia/<component>/ (nvidia/cu13/ for CUDA 13,
// nvidia/cuda_nvcc/, nvidia/cuda_runtime/, ... for CUDA 12); merged, they are a toolkit tree whose
// own bin/nvcc.profile finds cicc, ptxas, fatbinary, nvlink, the headers and CCCL relative to nvcc.
#include <algorithm>
#include <optional>

#include "archive/unpack.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"
#include "toolchain/cuda.h"
#include "toolchain/toolkit_dir.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

// What nvcc needs to compile and what kiln links against, relative to the toolkit root.
const std::vector<std::string> kRequired = {
    "bin/nvcc",
    "bin/nvcc.profile",
    "bin/cudafe++",
    "bin/ptxas",
    "bin/fatbinary",
    "bin/nvlink",
    "nvvm/bin/cicc",
    "nvvm/libdevice/libdevice.10.bc",
    "include/cuda_runtime.h",
    "include/crt/host_config.h",
    "lib/libcudart.so",
};

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
Expected<void> lay_out(const fs::path& root) {
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
  KILN_CHECK(ensure_directory(root / "targets" / "x86_64-linux"));
  KILN_CHECK(link_once("../../include", root / "targets" / "x86_64-linux" / "include", true));
  KILN_CHECK(link_once("../../lib", root / "targets" / "x86_64-linux" / "lib", true));
  return {};
}

Expected<CudaToolkit> open_toolkit(const fs::path& root, const std::string& wanted) {
  fs::path nvcc = root / "bin" / "nvcc";
  auto text = run_capture({nvcc.string(), "--version"});
  if (!text) return Error::failed(cat("cannot run ", nvcc.string(), ": ", text.error().message));
  CudaToolkit t{root, nvcc, parse_nvcc_release(*text), *text};
  if (t.version != wanted)
    return Error::bad_input(cat("the pinned CUDA wheels hold nvcc ",
                                t.version.empty() ? "of an unknown release" : t.version,
                                ", but the target asks for CUDA ", wanted,
                                ": pin the wheels of CUDA ", wanted));
  return t;
}

// Fills `root` from the wheels (unpacked one by one in `scratch`); what the marker records.
Expected<nlohmann::json> fill_toolkit(const CudaRequest& request,
                                      const std::vector<fs::path>& wheels, const fs::path& root,
                                      const fs::path& scratch) {
  for (std::size_t i = 0; i < wheels.size(); ++i) {
    fs::path unpacked = scratch / cat("w", i);
    archive::UnpackOptions options;
    options.filter = [](std::string_view path) { return path.rfind("nvidia/", 0) == 0; };
    auto done = archive::unpack(wheels[i], unpacked, options);
    if (!done)
      return Error{done.error().kind,
                   cat("cannot unpack ", wheels[i].filename().string(), ": ", done.error().message),
                   ""};
    KILN_CHECK(merge_wheel(unpacked, root, wheels[i].filename().string()));
    std::error_code ec;
    fs::remove_all(unpacked, ec);
  }
  KILN_CHECK(lay_out(root));
  std::vector<std::string> missing;
  for (const auto& rel : kRequired)
    if (!present(root / rel)) missing.push_back(rel);
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
  KILN_TRY(CudaToolkit t, open_toolkit(root, request.version));  // checked before it is renamed in
  nlohmann::json marker = {{"version", t.version},
                           {"nvcc_version", t.version_text},
                           {"wheels", nlohmann::json::array()}};
  for (const auto& w : request.wheels)
    marker["wheels"].push_back({{"file", w.file}, {"sha256", w.sha256}});
  return marker;
}

}  // namespace

std::string wheel_toolkit_name(const CudaRequest& request) {
  std::vector<std::string> pins;
  for (const auto& w : request.wheels) pins.push_back(cat(w.sha256, " ", w.file));
  std::sort(pins.begin(), pins.end());  // the set, not its order, is the toolkit
  return cat("cuda-", request.version, "-", sha256_hex(join(pins, "\n")).substr(0, 16));
}

Expected<CudaToolkit> cuda_from_wheels(const CudaRequest& request,
                                       const std::vector<fs::path>& wheels,
                                       const fs::path& toolkits) {
  if (wheels.size() != request.wheels.size() || wheels.empty())
    return Error::bad_input(
        cat("the CUDA ", request.version, " wheel toolkit needs its pinned wheels"));
  ToolkitMaker maker;
  maker.open = [&](const fs::path& root) { return open_toolkit(root, request.version); };
  maker.make = [&](const fs::path& root, const fs::path& scratch) {
    return fill_toolkit(request, wheels, root, scratch);
  };
  maker.what = cat("the CUDA ", request.version, " toolkit from ", wheels.size(), " wheels");
  return ensure_toolkit(toolkits / wheel_toolkit_name(request), maker);
}

namespace {

class WheelsSource : public CudaSource {
 public:
  WheelsSource(CudaRequest request, fs::path toolkits, FetchPinned fetch)
      : request_(std::move(request)), toolkits_(std::move(toolkits)), fetch_(std::move(fetch)) {}

  Expected<nlohmann::json> identity() override {
    nlohmann::json wheels = nlohmann::json::array();
    for (const auto& w : request_.wheels)
      wheels.push_back({{"file", w.file}, {"sha256", w.sha256}});
    return nlohmann::json{{"toolkit", "wheels"}, {"version", request_.version}, {"wheels", wheels}};
  }

  Expected<CudaToolkit> toolkit() override {
    if (ready_) return *ready_;
    if (!fetch_) return Error::failed("the wheel toolkit has no way to fetch its wheels");
    // From the download cache when they are there (no network), so a toolkit can be laid out again.
    std::vector<fs::path> files;
    for (const auto& w : request_.wheels) {
      auto got = fetch_(w.file, w.sha256);
      if (!got)
        return Error{got.error().kind,
                     cat("CUDA ", request_.version, " toolkit: ", got.error().message),
                     got.error().detail};
      files.push_back(*got);
    }
    KILN_TRY(CudaToolkit t, cuda_from_wheels(request_, files, toolkits_));
    ready_ = t;
    return t;
  }

 private:
  CudaRequest request_;
  fs::path toolkits_;
  FetchPinned fetch_;
  std::optional<CudaToolkit> ready_;
};

}  // namespace

std::unique_ptr<CudaSource> wheels_cuda_source(const CudaRequest& request, const fs::path& toolkits,
                                               FetchPinned fetch) {
  return std::make_unique<WheelsSource>(request, toolkits, std::move(fetch));
}

}  // namespace kiln::toolchain
