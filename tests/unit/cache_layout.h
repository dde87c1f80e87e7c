// The cache's layout on disk as tests see it: the names every kiln has used (a cache made by one
// is used by the next), written out here so that a test fails when cache::Store changes them.
// cache::Store keeps these paths to itself.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "cache/store.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::testing {

struct CacheLayout {
  std::filesystem::path root;
  std::filesystem::path tmp_root() const { return root / "tmp"; }
  std::filesystem::path wheels() const { return root / "wheels"; }
  std::filesystem::path kiln_wheels() const { return root / "kiln-wheels"; }
  std::filesystem::path objects() const { return root / "objects"; }
  std::filesystem::path last_root() const { return root / "last"; }
  std::filesystem::path build_roots() const { return root / "build"; }
  std::filesystem::path logs() const { return root / "logs"; }
  std::filesystem::path lock_path(std::string_view name) const {
    return root / "locks" / cat(name, ".lock");
  }
  std::filesystem::path last_inputs(std::string_view target, std::string_view package) const {
    return root / "last" / target / cat(package, ".json");
  }
  std::filesystem::path object_path(std::string_view key, std::string_view suffix) const {
    return objects() / key.substr(0, 2) / cat(key, suffix);
  }
  std::filesystem::path download_path(std::string_view sha256, std::string_view file) const {
    return root / "downloads" / sha256.substr(0, 2) / sha256 / file;
  }
  std::filesystem::path git_mirror(std::string_view url) const {
    return root / "git" / sha256_hex(url);
  }
  std::filesystem::path made(const cache::MadeOnce& what) const {
    return root / what.folder / what.name;
  }
};

inline CacheLayout layout(const cache::Store& store) {
  return CacheLayout{store.root()};
}

}  // namespace kiln::testing
