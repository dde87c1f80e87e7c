// A source nobody has pinned yet (`kiln fetch --print-sha256`): the sdist of one release on the
// index pip would use, or a file at a URL or path, fetched into the download cache and hashed, so
// a manifest author copies its sha256 rather than reading it from an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "fetch/source.h"
#include "packaging/specifier.h"

namespace kiln::fetch {

// One SOURCE argument.
struct NewSource {
  enum class Kind { Pypi, Url, Path };
  Kind kind = Kind::Pypi;
  std::string text;                // the argument as given
  packaging::Requirement release;  // Pypi: NAME==VERSION (name as written, one "==" specifier)
  std::string url;                 // Url: http://, https:// or file://, as given
  std::filesystem::path path;      // Path: absolute
};

// "pypi:NAME==VERSION" (one exact release), an http://, https:// or file:// URL, or the path of a
// file (a word that names no file is taken for a package name: an error that says so). Errors are
// BadInput.
Expected<NewSource> parse_new_source(std::string_view text);

// What was fetched, and the pin a manifest's [source] would carry.
struct NewPin {
  std::string file;  // its name in the download cache (a PyPI source's `file`)
  std::string sha256;
  std::uint64_t size = 0;
  std::string url;             // where it came from ("" for a path)
  std::filesystem::path path;  // in the download cache
  bool downloaded = false;     // it came over the network this time
};

// Fetches `source` into the download cache of `context.downloader`. A PyPI release's sdist is
// found on the project's page of `context.index_url` (exactly one sdist of that release, its name
// a plain file name; the page's links http(s) only); when the index states its sha256 (and size),
// the Downloader fetches it pinned by them (reused from the cache on the next run). A file whose
// sha256 nobody states comes through Downloader::fetch_unpinned (an http(s) URL: its retries and
// size limit) or import_unpinned (a path or file:// URL: the user's own), hashed as it arrives.
// Downloads are refused offline: there is no pin to find a cached file by.
Expected<NewPin> fetch_new_source(Context& context, const NewSource& source);

}  // namespace kiln::fetch
