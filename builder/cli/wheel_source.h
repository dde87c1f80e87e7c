// A wheel named on the command line as a file or an http(s) URL (`kiln rebuild`, `kiln verify`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "cache/store.h"

namespace kiln::cli {

// The wheel `given` names: a file as it is (made absolute), or a URL's wheel downloaded into the
// cache's downloads (verified when the URL carries an index's "#sha256=" fragment, which also
// finds it there offline). A URL that names no .whl file is a BadInput error.
std::filesystem::path wheel_file(const std::string& given, cache::Store& store, bool offline,
                                 const std::string& index_url);

// The body of a small file at an http(s) `url` (at most `max_bytes`); nullopt when the server
// answers 404 or 410; other failures are errors naming the URL.
std::optional<std::string> fetch_small_file(const std::string& url, std::uint64_t max_bytes);

}  // namespace kiln::cli
