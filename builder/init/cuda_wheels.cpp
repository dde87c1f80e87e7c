#include "init/cuda_wheels.h"

#include <algorithm>

#include "archive/zip_reader.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "init/requirements.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

namespace kiln::init {

namespace {

// A final release: digits and dots only ("13.4.0rc1" is not).
bool is_final(const std::string& version) {
  return !version.empty() && std::all_of(version.begin(), version.end(),
                                         [](char c) { return is_ascii_digit(c) || c == '.'; });
}

// The newest cuda-toolkit release of `cuda_version` ("13.2" -> "13.2.2") on a page.
Expected<std::string> newest_release(const std::vector<fetch::IndexFile>& page,
                                     const std::string& cuda_version) {
  std::string best;
  for (const auto& f : page) {
    auto w = unbuilt_wheel(f.filename);
    if (!w || w->version.rfind(cuda_version + ".", 0) != 0 || !is_final(w->version)) continue;
    if (best.empty() || packaging::version_less(best, w->version)) best = w->version;
  }
  if (best.empty())
    return Error::failed(cat("the index has no cuda-toolkit release of CUDA ", cuda_version));
  return best;
}

// The GCC range of a crt wheel's include/crt/host_config.h.
Expected<void> read_gcc_range(fetch::Downloader& downloader, const fetch::IndexFile& crt,
                              ToolkitWheels& out) {
  constexpr std::uint64_t kMaxHeaderBytes = 1u << 20;
  KILN_TRY(fetch::CachedFile got, downloader.fetch(crt.url, crt.filename, crt.sha256, crt.size));
  KILN_TRY(archive::ZipReader zip, archive::ZipReader::open(got.path, {}, true));
  for (const auto& e : zip.entries()) {
    if (!e.name.ends_with("/include/crt/host_config.h")) continue;
    KILN_TRY(std::string text, zip.read(e, kMaxHeaderBytes));
    out.gcc.max = toolchain::host_config_gcc_max(text);
    out.gcc_from = cat(crt.filename, ":", e.name);
  }
  return {};
}

}  // namespace

std::optional<packaging::WheelFileName> unbuilt_wheel(std::string_view file) {
  auto w = packaging::parse_wheel_file_name(file);
  if (!w || !w->build.empty()) return std::nullopt;
  return std::move(*w);
}

bool is_linux_x86_64(const packaging::WheelFileName& wheel) {
  for (const std::string& tag : wheel.platform_tags) {
    std::string arch;
    if (tag == "any" || tag == "linux_x86_64" ||
        (manifest::manylinux_minor(tag, arch) >= 0 && arch == "x86_64"))
      return true;
  }
  return false;
}

Expected<std::string> wheel_metadata(const std::filesystem::path& wheel, bool check_names) {
  constexpr std::uint64_t kMaxMetadataBytes = 4u << 20;
  KILN_TRY(archive::ZipReader zip, archive::ZipReader::open(wheel, {}, check_names));
  for (const auto& e : zip.entries())
    if (e.name.ends_with(".dist-info/METADATA") &&
        std::count(e.name.begin(), e.name.end(), '/') == 1)
      return zip.read(e, kMaxMetadataBytes);
  return Error::failed(cat(wheel.filename().string(), " has no .dist-info/METADATA"));
}

Expected<fetch::IndexFile> newest_wheel(const std::vector<fetch::IndexFile>& page,
                                        const std::string& project, const std::string& spec) {
  const fetch::IndexFile* best = nullptr;
  std::string best_version;
  for (const auto& f : page) {
    auto w = unbuilt_wheel(f.filename);
    if (!w || w->project != project || !version_matches(w->version, spec) || !is_linux_x86_64(*w) ||
        !is_final(w->version))
      continue;
    if (best && !packaging::version_less(best_version, w->version)) continue;
    best = &f;
    best_version = w->version;
  }
  if (!best)
    return Error::failed(cat("the index has no Linux x86_64 wheel of ", project, "==", spec));
  if (!is_sha256_hex(best->sha256))
    return Error::failed(cat("the index gives no sha256 for ", best->filename,
                             ": kiln pins every file by its sha256"));
  return *best;
}

Expected<ToolkitWheels> cuda_toolkit_wheels(fetch::Downloader& downloader, const std::string& index,
                                            const std::string& cuda_version, std::string release) {
  fetch::Context context{downloader, index};
  KILN_TRY(auto page, fetch::read_project_page(context, "cuda-toolkit"));
  if (release.empty()) {
    KILN_TRY(release, newest_release(page, cuda_version));
  }
  KILN_TRY(fetch::IndexFile meta_wheel, newest_wheel(page, "cuda-toolkit", release));
  KILN_TRY(fetch::CachedFile got, downloader.fetch(meta_wheel.url, meta_wheel.filename,
                                                   meta_wheel.sha256, meta_wheel.size));
  KILN_TRY(std::string metadata, wheel_metadata(got.path, true));
  std::vector<Component> components = toolkit_components(metadata);
  for (const char* needed : {"nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm",
                             "nvidia-cuda-runtime", "nvidia-cuda-cccl"})
    if (std::none_of(components.begin(), components.end(),
                     [&](const Component& c) { return c.project == needed; }))
      return Error::failed(cat("cuda-toolkit ", release, " pins no ", needed,
                               ": kiln cannot make a compiler of its wheels"));
  ToolkitWheels out{release, {}};
  for (const Component& c : components) {
    KILN_TRY(auto files, fetch::read_project_page(context, c.project));
    KILN_TRY(fetch::IndexFile wheel, newest_wheel(files, c.project, c.version));
    out.wheels.push_back({wheel.filename, wheel.sha256});
    if (c.project == "nvidia-cuda-crt") KILN_CHECK(read_gcc_range(downloader, wheel, out));
  }
  return out;
}

}  // namespace kiln::init
