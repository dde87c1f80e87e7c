#include "toolchain/toolkit_dir.h"

#include <algorithm>

#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec));
}

Expected<void> link_once(const fs::path& target, const fs::path& at, bool directory) {
  if (present(at)) return {};
  std::error_code ec;
  if (directory)
    fs::create_directory_symlink(target, at, ec);
  else
    fs::create_symlink(target, at, ec);
  if (ec) return Error::failed(cat("cannot link ", at.string(), ": ", ec.message()));
  return {};
}

Expected<void> link_targets(const fs::path& root, std::string_view lib) {
  KILN_CHECK(ensure_directory(root / "targets" / "x86_64-linux"));
  KILN_CHECK(link_once("../../include", root / "targets" / "x86_64-linux" / "include", true));
  KILN_CHECK(link_once(cat("../../", lib), root / "targets" / "x86_64-linux" / "lib", true));
  return {};
}

std::vector<std::string> missing_files(const fs::path& root,
                                       const std::vector<std::string>& extra) {
  static const std::vector<std::string> kEvery = {
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
  };
  std::vector<std::string> missing;
  std::error_code ec;
  for (const auto* list : {&kEvery, &extra})
    for (const auto& rel : *list)
      if (!fs::exists(root / rel, ec)) missing.push_back(rel);
  return missing;
}

std::string toolkit_pins_sha256(const std::vector<CudaRequest::Pin>& pins) {
  std::vector<std::string> lines;
  for (const auto& pin : pins) lines.push_back(cat(pin.sha256, " ", pin.file));
  std::sort(lines.begin(), lines.end());  // the set, not its order, is the toolkit
  return sha256_hex(join(lines, "\n"));
}

Expected<CudaToolkit> run_nvcc(const fs::path& root) {
  fs::path nvcc = root / "bin" / "nvcc";
  auto text = run_capture({nvcc.string(), "--version"});
  if (!text) return Error::failed(cat("cannot run ", nvcc.string(), ": ", text.error().message));
  return CudaToolkit{root, nvcc, parse_nvcc_release(*text), *text};
}

Expected<void> merge_each(
    const std::vector<fs::path>& files, const fs::path& scratch, std::string_view prefix,
    const std::function<Expected<void>(const fs::path& file, const fs::path& unpacked)>& step) {
  for (std::size_t i = 0; i < files.size(); ++i) {
    fs::path unpacked = scratch / cat(prefix, i);
    KILN_CHECK(step(files[i], unpacked));
    std::error_code ec;
    fs::remove_all(unpacked, ec);
  }
  return {};
}

Expected<CudaToolkit> ensure_toolkit(const cache::Store& cache, cache::MadeOnce what,
                                     const ToolkitMaker& maker) {
  what.what = maker.what;
  KILN_TRY(fs::path dir,
           cache.ensure(what, [&](const fs::path& root, const fs::path& scratch) -> Expected<void> {
             KILN_CHECK(ensure_directory(root));
             KILN_TRY(nlohmann::json marker, maker.make(root, scratch));
             return write_file_atomic(root / cache::kToolkitMarker, marker.dump(2) + "\n");
           }));
  return maker.open(dir);
}

namespace {

class PinnedSource : public CudaSource {
 public:
  PinnedSource(PinnedToolkit toolkit, const cache::Store* cache, FetchPinned fetch)
      : toolkit_(std::move(toolkit)), cache_(cache), fetch_(std::move(fetch)) {}

  Expected<nlohmann::json> identity() override { return toolkit_.identity(); }

  Expected<CudaToolkit> toolkit() override {
    if (ready_) return *ready_;
    if (!fetch_) return Error::failed(toolkit_.no_fetch);
    if (!cache_) return Error::failed(cat(toolkit_.context, "no cache to lay the toolkit out in"));
    std::vector<fs::path> files;
    for (const auto& pin : toolkit_.pins) {
      auto got = fetch_(pin.file, pin.sha256);
      if (!got)
        return Error{got.error().kind, cat(toolkit_.context, got.error().message),
                     got.error().detail};
      files.push_back(*got);
    }
    KILN_TRY(CudaToolkit t, toolkit_.made(files, *cache_));
    ready_ = t;
    return t;
  }

 private:
  PinnedToolkit toolkit_;
  const cache::Store* cache_;
  FetchPinned fetch_;
  std::optional<CudaToolkit> ready_;
};

}  // namespace

std::unique_ptr<CudaSource> pinned_toolkit_source(PinnedToolkit toolkit, const cache::Store* cache,
                                                  FetchPinned fetch) {
  return std::make_unique<PinnedSource>(std::move(toolkit), cache, std::move(fetch));
}

}  // namespace kiln::toolchain
