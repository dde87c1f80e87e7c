// A safe copy of a directory tree (a local source): nothing is created outside the destination.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/expected.h"

namespace kiln::archive {

struct CopyLimits {
  std::uint64_t max_total_bytes = 8ull << 30;
  std::uint64_t max_entries = 200000;
  int max_depth = 128;
};

// Copies `from` into `dest` (which must not exist): regular files (0755 when executable, else
// 0644), directories, and symlinks whose target resolves inside `from` (copied as links; an
// absolute one is rewritten relative to its directory). A link that resolves outside `from`,
// dangles out of it or loops is Error::bad_input naming the link and its target. Skips `.git` and
// `__pycache__` directories and anything that is not a file, directory or symlink. Every entry is
// opened without following links (a tree that changes meanwhile cannot redirect a read or a
// write), and the links are checked again in the finished copy. On error `dest` is removed.
Expected<void> copy_tree(const std::filesystem::path& from, const std::filesystem::path& dest,
                         const CopyLimits& limits = {});

}  // namespace kiln::archive
