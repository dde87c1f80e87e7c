#include "pipeline/pins.h"

#include "manifest/backend.h"

#include <algorithm>
#include <tuple>

#include "core/strings.h"
#include "fetch/debian_mirror.h"
#include "fetch/source.h"

namespace kiln::pipeline {

Expected<manifest::TorchWheel> torch_wheel_for(const manifest::Target& target,
                                               const std::string& abi_tag) {
  const manifest::TorchWheel* wheel = nullptr;
  for (const auto& w : target.torch_wheels)
    if (w.python_tag == abi_tag) wheel = &w;
  if (!wheel)
    return Error::failed(cat("target ", target.name, " pins no torch wheel for ", abi_tag));
  return *wheel;
}

PinnedFile cuda_pin(const manifest::Target& target, const std::string& file,
                    const std::string& sha256) {
  if (target.cuda_toolkit == manifest::ToolkitKind::Debian)
    return {"debian", manifest::CudaDeb{file, sha256}.file(), sha256, file};
  return {manifest::CudaWheel{file, sha256}.project(), file, sha256};
}

Expected<std::vector<PinnedFile>> pinned_files(const resolve::Plan& plan,
                                               const resolve::ResolvedTarget& rt) {
  bool compiled = false, setuptools = false;
  for (const auto& item : plan.items) {
    if (item.target_name != rt.target.name) continue;
    const manifest::BackendSpec& backend = *item.manifest->backend;
    compiled = compiled || backend.compiles;
    setuptools = setuptools || backend.needs_build_env;
  }
  std::vector<PinnedFile> out;
  if (compiled) {
    if (!rt.cuda) {  // a toolkit from wheels or Debian packages (else resolve found the system's)
      for (const auto& w : rt.target.cuda_wheels)
        out.push_back(cuda_pin(rt.target, w.file, w.sha256));
      for (const auto& d : rt.target.cuda_debs)
        out.push_back(cuda_pin(rt.target, d.path, d.sha256));
    }
    if (!rt.torch) {  // a pinned torch (resolve found an environment's otherwise)
      if (!rt.python)
        return Error::failed(cat("target ", rt.target.name, " was resolved without its Python"));
      KILN_TRY(manifest::TorchWheel torch, torch_wheel_for(rt.target, rt.python->abi_tag));
      out.push_back({"torch", torch.file, torch.sha256, "", rt.target.torch_index_url});
    }
  }
  if (setuptools) {
    KILN_TRY(auto wheels, plan.build_env.wheels_for(rt.target));
    for (const auto& w : wheels) out.push_back({w.project, w.file, w.sha256});
  }
  auto key = [](const PinnedFile& f) { return std::tie(f.project, f.file, f.sha256, f.pool_path); };
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  out.erase(std::unique(out.begin(), out.end(),
                        [&](const auto& a, const auto& b) { return key(a) == key(b); }),
            out.end());
  return out;
}

namespace {

// A Debian package: from the download cache when it is there, else from apt's mirror.
Expected<fetch::Fetched> fetch_debian_package(Fetching& fetching, const PinnedFile& file) {
  fetch::Downloader& downloader = fetching.context().downloader;
  if (auto cached = downloader.find_cached(file.sha256, file.file))
    return fetch::Fetched{*cached, false, file.sha256, false};
  if (downloader.offline()) return downloader.offline_error(file.file, file.sha256);
  KILN_TRY(std::string mirror, fetch::debian_mirror());
  KILN_TRY(fetch::CachedFile got,
           downloader.fetch(cat(mirror, "/", file.pool_path), file.file, file.sha256, std::nullopt,
                            fetch::UrlFrom::User));  // apt's configured mirror: the machine's own
  return fetch::Fetched{got.path, false, file.sha256, got.downloaded};
}

}  // namespace

Expected<fetch::Fetched> fetch_pinned(Fetching& fetching, const PinnedFile& file) {
  if (!file.pool_path.empty()) return fetch_debian_package(fetching, file);
  if (file.index_url.empty())
    return fetch::fetch_index_file(fetching.context(), file.project, file.file, file.sha256);
  fetch::Context context{fetching.context().downloader, file.index_url};
  return fetch::fetch_index_file(context, file.project, file.file, file.sha256);
}

}  // namespace kiln::pipeline
