// cache/'s own helpers for the names it reads from disk and from callers (not for other stages).
#pragma once

#include <string_view>

namespace kiln::cache {

// A name that stays inside its directory: no separator, no control character, not "." or "..".
bool is_plain_name(std::string_view name);

}  // namespace kiln::cache

#include <filesystem>
#include <string>

#include "cache/store.h"

namespace kiln::cache {

// The layout's private paths, for cache/'s own files (evict.cpp, git_gc.cpp) and nothing else.
struct StoreInternals {
  static std::filesystem::path wheels(const Store& s) { return s.wheels(); }
  static std::filesystem::path lock_path(const Store& s, std::string_view name) {
    return s.lock_path(name);
  }
};

}  // namespace kiln::cache
