// Sources: get exactly the bytes a manifest pins. One backend per kind (pypi, url, git, local),
// one file each, picked by make_source().
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "core/expected.h"
#include "fetch/downloader.h"
#include "fetch/simple_index.h"
#include "manifest/manifest.h"

namespace kiln::fetch {

struct Fetched {
  std::filesystem::path path;  // the archive (in the download cache) or the directory
  bool is_directory = false;
  std::string sha256;          // the archive's sha256, or the directory's tree_sha256 (core/fs.h)
  bool downloaded = false;     // network I/O was needed (a download or a git fetch)
  std::filesystem::path kept;  // a git source's mirror in the cache (empty for the others)
};

// What the backends share.
struct Context {
  Downloader& downloader;  // the download cache, its HttpClient and the offline switch
  std::string index_url;   // for PyPI sources: configured_index().url (index_config.h)
};

class Source {
 public:
  virtual ~Source() = default;
  // `checkout_dir`: where a git source is checked out; it must not exist (it is created whole,
  // through a temporary directory beside it). Archive sources leave it alone and return the
  // verified archive in the download cache; a local directory source returns that directory,
  // which callers must not modify.
  virtual Expected<Fetched> fetch(const std::filesystem::path& checkout_dir) = 0;
};

// The backend for `source.kind`. `context` must outlive the returned Source.
std::unique_ptr<Source> make_source(const manifest::Source& source, Context& context);

// The files of a project's page on `context.index_url` (PEP 691 JSON, or PEP 503 HTML).
Expected<std::vector<IndexFile>> read_project_page(Context& context, const std::string& project);

// A file from the package index by project, file name and sha256 (kiln's pinned torch wheels):
// from the download cache when it is there (no network I/O), else found on the project's page
// (PEP 691 JSON, or PEP 503 HTML when the index speaks no JSON) and downloaded. With an empty
// `filename`, the file whose index sha256 equals `sha256`.
Expected<Fetched> fetch_index_file(Context& context, const std::string& project,
                                   const std::string& filename, const std::string& sha256);

}  // namespace kiln::fetch
