#include "pipeline/sources.h"

#include <cstdlib>

#include "archive/copy.h"
#include "archive/unpack.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "fetch/index_config.h"
#include "patch/patch.h"

namespace kiln::pipeline {

namespace fs = std::filesystem;

Fetching::Fetching(std::unique_ptr<fetch::HttpClient> http, const cache::Store& store, bool offline,
                   std::string index)
    : http_(std::move(http)),
      store_(store),
      downloader_(*http_, store_, offline),
      context_{downloader_, std::move(index)} {}

Expected<std::unique_ptr<Fetching>> Fetching::create(const cache::Store& store, bool offline,
                                                     const std::string& index_url) {
  KILN_TRY(fetch::IndexSetting index, fetch::configured_index(index_url));
  auto fetching =
      std::unique_ptr<Fetching>(new Fetching(fetch::make_curl_client(), store, offline, index.url));
  // What kiln writes into is marked as kiln's cache; a cache this process may only read is no
  // error here (what it then cannot write fails with its own message).
  (void)fetching->store_.mark();
  if (const char* limit = std::getenv("KILN_MAX_DOWNLOAD"); limit && *limit) {
    auto bytes = parse_byte_size(limit);
    if (!bytes || *bytes == 0)
      return Error::bad_input(
          cat("KILN_MAX_DOWNLOAD='", printable_excerpt(limit, 40),
              "': expected a size in bytes, or with a K, M or G suffix (e.g. 8G)"));
    fetching->downloader_.set_max_bytes(*bytes);
  }
  // Progress on stderr only: stdout holds results (--json), whatever stderr is.
  fetching->downloader_.set_progress(fetch::DownloadProgress::to_stderr());
  return fetching;
}

std::size_t Fetching::downloads() const {
  return git_fetches_ + static_cast<std::size_t>(downloader_.network_downloads());
}

Expected<fetch::Fetched> fetch_package(const manifest::Manifest& m, Fetching& fetching,
                                       const fs::path& checkout_dir) {
  KILN_TRY(fetch::Fetched got,
           fetch::make_source(m.source, fetching.context())->fetch(checkout_dir));
  if (got.downloaded && m.source.kind == manifest::Source::Kind::Git) fetching.count_git_fetch();
  return got;
}

Expected<PreparedTree> prepare_tree(const manifest::Manifest& m, Fetching& fetching,
                                    const fs::path& scratch, const fs::path& dest) {
  std::error_code ec;
  if (fs::exists(dest, ec)) return Error::bad_input(cat(dest.string(), " already exists"));
  fs::remove_all(scratch, ec);
  KILN_CHECK(ensure_directory(scratch));
  KILN_TRY(fetch::Fetched source, fetch_package(m, fetching, scratch / "checkout"));
  fs::path tree = scratch / "tree";
  if (source.is_directory) {
    KILN_CHECK(archive::copy_tree(source.path, tree));
  } else {
    auto unpacked = archive::unpack(source.path, scratch / "unpacked");
    if (!unpacked) {
      // A hostile or broken archive is not kept, though its bytes matched the pin.
      if (unpacked.error().kind == ErrorKind::BadInput)
        fetching.store().discard_download(source.path);
      return std::move(unpacked).error();
    }
    fs::path top = scratch / "unpacked";
    // An sdist holds one top-level directory, name-version/: the tree is what is inside.
    if (unpacked->top_level.size() == 1 && fs::is_directory(top / unpacked->top_level[0]) &&
        !fs::is_symlink(top / unpacked->top_level[0]))
      top /= unpacked->top_level[0];
    fs::rename(top, tree, ec);
    if (ec)
      return Error::failed(cat("cannot move the unpacked sources into place: ", ec.message()));
  }
  PreparedTree prepared;
  if (!m.patches.empty()) {
    for (const auto& p : m.patches) {
      KILN_TRY(std::string text, read_file(p.path));
      if (sha256_hex(text) != p.sha256)
        return Error::failed(
            cat("patch ", p.name, " of ", m.display_path, " changed after the manifest was read"));
      prepared.patches.push_back({p.name, std::move(text)});
    }
    KILN_TRY(patch::ApplyResult applied, patch::apply_series(tree, prepared.patches, 1));
    prepared.notes = std::move(applied.notes);
  }
  KILN_CHECK(ensure_directory(dest.parent_path().empty() ? fs::path(".") : dest.parent_path()));
  fs::rename(tree, dest, ec);
  if (ec) {  // another filesystem: copy beside dest, then rename, so dest appears whole
    KILN_TRY(TempDir staging,
             TempDir::create(dest.parent_path().empty() ? fs::path(".") : dest.parent_path(),
                             cat(".", dest.filename().string(), ".tmp-")));
    KILN_CHECK(archive::copy_tree(tree, staging.path() / "t"));
    fs::rename(staging.path() / "t", dest, ec);
    if (ec) return Error::failed(cat("cannot create ", dest.string(), ": ", ec.message()));
  }
  fs::remove_all(scratch, ec);
  return prepared;
}

}  // namespace kiln::pipeline
