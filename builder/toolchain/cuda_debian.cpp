// A CUDA toolkit from Debian's packages (nvidia-cuda-toolkit, nvidia-cuda-dev, libcudart12,
// libnvvm4 and CCCL's libcu++-dev, libcub-dev, libthrust-dev): Debian installs them under /usr
// (nvcc and cicc in /usr/lib/nvidia-cuda-toolkit/bin, the other tools in /usr/bin, headers in
// /usr/include, libraries in /usr/lib/x86_64-linux-gnu) with an nvcc.profile that is a link to
// /etc/nvcc.profile. kiln takes from each package's data only what a build needs, moves it into a
// tree laid out like an installed toolkit and writes an nvcc.profile of its own whose every path is
// relative to nvcc, so the toolkit reads nothing from /usr or /usr/local/cuda.
#include <algorithm>

#include "archive/deb.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "manifest/toolkit.h"
#include "toolchain/cuda.h"
#include "toolchain/toolkit_dir.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

// A package path and where it goes. A `from` ending in '/' takes everything under it; one ending
// in '*' takes the names it starts, followed by '.' or nothing (libcudart.so, libcudart.so.12).
struct Rule {
  std::string_view from, to;
};
constexpr Rule kRules[] = {
    {"usr/lib/nvidia-cuda-toolkit/bin/nvcc", "bin/nvcc"},
    {"usr/lib/nvidia-cuda-toolkit/bin/cicc", "nvvm/bin/cicc"},
    {"usr/lib/nvidia-cuda-toolkit/bin/crt/", "bin/crt/"},
    {"usr/lib/nvidia-cuda-toolkit/libdevice/", "nvvm/libdevice/"},
    {"usr/bin/cudafe++", "bin/cudafe++"},
    {"usr/bin/ptxas", "bin/ptxas"},
    {"usr/bin/fatbinary", "bin/fatbinary"},
    {"usr/bin/nvlink", "bin/nvlink"},
    {"usr/bin/bin2c", "bin/bin2c"},
    {"usr/bin/cuobjdump", "bin/cuobjdump"},
    {"usr/bin/nvprune", "bin/nvprune"},
    {"usr/bin/cu++filt", "bin/cu++filt"},
    {"usr/include/nvvm.h", "nvvm/include/nvvm.h"},
    {"usr/lib/x86_64-linux-gnu/libnvvm.so*", "nvvm/lib64/libnvvm.so"},
    {"usr/lib/x86_64-linux-gnu/libcudart.so*", "lib64/libcudart.so"},
    {"usr/lib/x86_64-linux-gnu/libcudart_static.a", "lib64/libcudart_static.a"},
    {"usr/lib/x86_64-linux-gnu/libcudadevrt.a", "lib64/libcudadevrt.a"},
    {"usr/lib/x86_64-linux-gnu/stubs/libcuda.so", "lib64/stubs/libcuda.so"},
    {"usr/include/", "include/"},
};

// What nvcc needs to compile and what kiln links against, relative to the toolkit root.
// Beyond what every toolkit needs (toolkit_dir.h's missing_files).
const std::vector<std::string> kRequired = {
    "bin/crt/link.stub",        "include/cuda/std/version", "include/cub/cub.cuh",
    "include/thrust/version.h", "lib64/libcudart.so",
};

// Every path relative to nvcc's own directory ($(_HERE_)); the layout of NVIDIA's own profile,
// without its targets/ directory.
constexpr const char* kProfile = R"(# Written by kiln: every path is relative to this directory.
TOP              = $(_HERE_)/..

NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):

INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
)";

std::string file_of(const std::string& pool_path) {
  std::size_t slash = pool_path.rfind('/');
  return slash == std::string::npos ? pool_path : pool_path.substr(slash + 1);
}

// Moves one entry of an unpacked package into the toolkit, where debian_toolkit_path says.
Expected<void> place(const fs::path& from, const std::string& rel, const fs::path& root,
                     const std::string& package) {
  std::string to_rel = debian_toolkit_path(rel);
  if (to_rel.empty()) return {};  // the filter let a parent directory through
  fs::path to = root / to_rel;
  std::error_code ec;
  bool link = fs::is_symlink(fs::symlink_status(from, ec));
  if (link) {
    // Links stay in their directory: a target with no '/' cannot leave it wherever it lands.
    std::string target = fs::read_symlink(from, ec).string();
    if (ec || target.empty() || target.find('/') != std::string::npos || target == "." ||
        target == "..")
      return Error::bad_input(
          cat(package, ": ", rel, " is a link to '", target, "', outside its own directory"));
  }
  if (present(to)) {
    bool same = false;
    if (link) {
      same = fs::is_symlink(fs::symlink_status(to, ec)) &&
             fs::read_symlink(to, ec) == fs::read_symlink(from, ec);
    } else if (!fs::is_symlink(fs::symlink_status(to, ec))) {
      auto a = sha256_file(from);
      auto b = sha256_file(to);
      same = a && b && *a == *b;
    }
    if (!same)
      return Error::bad_input(cat("two of the pinned Debian packages hold different files at ",
                                  to_rel, " (", package, ": ", rel, ")"));
    return {};
  }
  KILN_CHECK(ensure_directory(to.parent_path()));
  fs::rename(from, to, ec);
  if (ec) return Error::failed(cat("cannot move ", rel, " into the toolkit: ", ec.message()));
  return {};
}

Expected<void> merge_package(const fs::path& unpacked, const fs::path& root,
                             const std::string& package) {
  std::error_code ec;
  std::vector<std::pair<fs::path, std::string>> entries;
  for (auto it = fs::recursive_directory_iterator(unpacked, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (it->is_directory() && !it->is_symlink()) continue;
    // lexically: fs::relative would resolve a link to what it names.
    entries.emplace_back(it->path(), it->path().lexically_relative(unpacked).generic_string());
  }
  if (ec) return Error::failed(cat("cannot read the unpacked ", package, ": ", ec.message()));
  std::sort(entries.begin(), entries.end());
  for (const auto& [path, rel] : entries) KILN_CHECK(place(path, rel, root, package));
  return {};
}

Expected<void> lay_out(const fs::path& root) {
  KILN_CHECK(write_file_atomic(root / "bin" / "nvcc.profile", kProfile));
  KILN_CHECK(ensure_directory(root / "lib64"));
  KILN_CHECK(link_once("lib64", root / "lib", true));
  KILN_CHECK(link_targets(root, "lib64"));
  std::vector<std::string> missing = missing_files(root, kRequired);
  if (!missing.empty())
    return Error::bad_input(cat(
        "the pinned Debian packages make no complete CUDA toolkit: missing ", join(missing, ", "),
        " (pin nvidia-cuda-toolkit, nvidia-cuda-dev, libcudart12, libnvvm4, "
        "libcu++-dev, libcub-dev and libthrust-dev)"));
  return {};
}

// The pins as the identity and the marker record them.
nlohmann::json debs_json(const CudaRequest& request) {
  nlohmann::json debs = nlohmann::json::array();
  for (const auto& d : request.debs) debs.push_back({{"path", d.file}, {"sha256", d.sha256}});
  return debs;
}

Expected<CudaToolkit> open_toolkit(const fs::path& root, const CudaRequest& request) {
  KILN_TRY(CudaToolkit t, run_nvcc(root));
  KILN_TRY(std::string release, debian_release(request));
  if (t.version != release)
    return Error::bad_input(cat("the pinned Debian packages hold nvcc ",
                                t.version.empty() ? "of an unknown release" : t.version,
                                ", but their nvidia-cuda-toolkit package says CUDA ", release));
  KILN_CHECK(cuda_compatibility(t.version, request.version));
  return t;
}

// What a build needs of one package's data, unpacked into `unpacked` and moved into `root`.
Expected<void> merge_deb(const fs::path& deb, const fs::path& unpacked, const fs::path& root) {
  std::string package = deb.filename().string();
  archive::UnpackOptions options;
  options.filter = [](std::string_view path) {
    return !path.ends_with('/') && !debian_toolkit_path(path).empty();
  };
  options.skip_rejected = true;
  log::info(cat("reading ", package));
  KILN_CHECK(archive::unpack_deb(deb, unpacked, options));
  return merge_package(unpacked, root, package);
}

// Fills `root` from the packages (unpacked one by one in `scratch`); what the marker records.
Expected<nlohmann::json> fill_toolkit(const CudaRequest& request, const std::vector<fs::path>& debs,
                                      const fs::path& root, const fs::path& scratch) {
  KILN_CHECK(merge_each(debs, scratch, "d", [&](const fs::path& deb, const fs::path& unpacked) {
    return merge_deb(deb, unpacked, root);
  }));
  KILN_CHECK(lay_out(root));
  KILN_TRY(CudaToolkit t, open_toolkit(root, request));  // checked before it is renamed in
  return nlohmann::json{{"toolkit", manifest::toolkit_name(manifest::ToolkitKind::Debian)},
                        {"release", t.version},
                        {"nvcc_version", t.version_text},
                        {"debs", debs_json(request)}};
}

}  // namespace

std::string debian_toolkit_path(std::string_view path) {
  for (const auto& rule : kRules) {
    std::string_view from = rule.from;
    if (from.ends_with('/')) {
      if (path.size() > from.size() && path.starts_with(from))
        return cat(rule.to, path.substr(from.size()));
    } else if (from.ends_with('*')) {
      from.remove_suffix(1);
      if (!path.starts_with(from)) continue;
      std::string_view rest = path.substr(from.size());
      if (rest.empty() || (rest.front() == '.' && rest.find('/') == std::string_view::npos))
        return cat(rule.to, rest);
    } else if (path == from) {
      return std::string(rule.to);
    }
  }
  return {};
}

Expected<std::string> debian_release(const CudaRequest& request) {
  constexpr std::string_view kPackage = "nvidia-cuda-toolkit_";
  for (const auto& d : request.debs) {
    std::string file = file_of(d.file);
    if (!file.starts_with(kPackage)) continue;
    // nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb: the upstream version's major.minor.
    Scanner s(std::string_view(file).substr(kPackage.size()));
    std::string_view major = s.take_while(is_ascii_digit);
    if (major.empty() || !s.skip('.')) break;
    std::string_view minor = s.take_while(is_ascii_digit);
    if (minor.empty() || major.size() > 2 || minor.size() > 2) break;
    return cat(major, ".", minor);
  }
  return Error::bad_input(
      "the Debian toolkit pins no nvidia-cuda-toolkit_<MAJOR.MINOR...>_amd64.deb (the package "
      "holding nvcc)");
}

cache::MadeOnce debian_toolkit_of(const CudaRequest& request) {
  auto release = debian_release(request);
  return cache::debian_toolkit(release ? *release : std::string("unknown"),
                               toolkit_pins_sha256(request.debs));
}

Expected<CudaToolkit> cuda_from_debs(const CudaRequest& request, const std::vector<fs::path>& debs,
                                     const cache::Store& cache) {
  if (debs.size() != request.debs.size() || debs.empty())
    return Error::bad_input("the Debian CUDA toolkit needs its pinned packages");
  KILN_CHECK(debian_release(request));
  return ensure_toolkit(cache, debian_toolkit_of(request),
                        {[&](const fs::path& root) { return open_toolkit(root, request); },
                         [&](const fs::path& root, const fs::path& scratch) {
                           return fill_toolkit(request, debs, root, scratch);
                         },
                         cat("the CUDA toolkit from ", debs.size(), " Debian packages")});
}

// The pins, the release their nvidia-cuda-toolkit holds and the rule that lets it build for
// torch's CUDA: refused by identity(), before anything is downloaded, when no rule does.
std::unique_ptr<CudaSource> debian_cuda_source(const CudaRequest& request,
                                               const cache::Store* cache, FetchPinned fetch) {
  PinnedToolkit toolkit{request.debs, "the Debian toolkit has no way to fetch its packages",
                        "CUDA toolkit from Debian: "};
  toolkit.identity = [request]() -> Expected<nlohmann::json> {
    KILN_TRY(std::string release, debian_release(request));
    KILN_TRY(std::string rule, cuda_compatibility(release, request.version));
    return nlohmann::json{{"toolkit", manifest::toolkit_name(manifest::ToolkitKind::Debian)},
                          {"version", request.version},
                          {"release", release},
                          {"compatibility", rule},
                          {"debs", debs_json(request)}};
  };
  toolkit.made = [request](const std::vector<fs::path>& files,
                           const cache::Store& cache) -> Expected<CudaToolkit> {
    KILN_TRY(CudaToolkit t, cuda_from_debs(request, files, cache));
    KILN_TRY(std::string rule, cuda_compatibility(t.version, request.version));
    log::info(
        cat("CUDA ", t.version, " from Debian for torch's CUDA ", request.version, ": ", rule));
    return t;
  };
  return pinned_toolkit_source(std::move(toolkit), cache, std::move(fetch));
}

}  // namespace kiln::toolchain
