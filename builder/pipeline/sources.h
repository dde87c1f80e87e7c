// A package's sources as a patched tree: fetch (pinned), unpack safely or copy, apply the
// manifest's patches in order. Shared by `kiln build` and `kiln prepare`.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/store.h"
#include "core/expected.h"
#include "fetch/downloader.h"
#include "fetch/http.h"
#include "fetch/source.h"
#include "manifest/manifest.h"
#include "patch/patch.h"

namespace kiln::pipeline {

// The fetch stage wired up: libcurl, the download cache (and git mirrors) of `store` (the run's
// one Store, which must outlive it), pip's index settings.
class Fetching {
 public:
  static Expected<std::unique_ptr<Fetching>> create(const cache::Store& store, bool offline,
                                                    const std::string& index_url);
  fetch::Context& context() { return context_; }
  // The cache whose download cache and git mirrors are filled.
  const cache::Store& store() const { return store_; }
  // Network downloads (files and git fetches) made so far.
  std::size_t downloads() const;
  void count_git_fetch() { ++git_fetches_; }

 private:
  Fetching(std::unique_ptr<fetch::HttpClient> http, const cache::Store& store, bool offline,
           std::string index);
  std::unique_ptr<fetch::HttpClient> http_;
  const cache::Store& store_;
  fetch::Downloader downloader_;
  fetch::Context context_;
  std::size_t git_fetches_ = 0;
};

// Fetches the manifest's source (verified against its pin).
Expected<fetch::Fetched> fetch_package(const manifest::Manifest& m, Fetching& fetching,
                                       const std::filesystem::path& checkout_dir);

// What prepare_tree applied: the patch series' bytes (each checked against the sha256 its manifest
// was loaded with), and the hunks that applied away from their stated line
// (patch::ApplyResult::notes), for a patch's author to see.
struct PreparedTree {
  std::vector<patch::PatchText> patches;
  std::vector<std::string> notes;
};

// Writes the patched source tree of `m` to `dest`, which must not exist. `scratch` is a directory
// kiln may use for this (it is emptied). On failure `dest` does not exist.
Expected<PreparedTree> prepare_tree(const manifest::Manifest& m, Fetching& fetching,
                                    const std::filesystem::path& scratch,
                                    const std::filesystem::path& dest);

}  // namespace kiln::pipeline
