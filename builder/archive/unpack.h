// Safe unpacking of tar (plain, gz, bz2, xz, zst) and zip: nothing escapes the destination.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/expected.h"

namespace kiln::archive {

struct UnpackLimits {
  std::uint64_t max_total_bytes = 8ull << 30;  // bytes written over all members
  std::uint64_t max_entry_bytes = 4ull << 30;  // bytes of one member
  std::uint64_t max_entries = 200000;          // members read, and also nodes created
};

struct UnpackOptions {
  UnpackLimits limits;
  // Every extracted file, directory and symlink gets this mtime.
  std::int64_t mtime = source_date_epoch();
  // Optional: extract only the members it accepts. It sees the normalised member path ("a/b.h",
  // no "./"); directories end with '/'. Parent directories of accepted members are created anyway.
  // Members it rejects are still checked (name, type, mode, link target as text) but neither
  // written nor counted against the size caps; a hardlink to a member it rejected is an error.
  std::function<bool(std::string_view path)> filter;
  // With a filter: members it rejects are skipped once their name is checked (their type, mode and
  // link target are not, since nothing is made of them). For archives whose unwanted members are
  // of kinds kiln never extracts (a .deb's links to /etc): archive/deb.h.
  bool skip_rejected = false;
};

struct UnpackResult {
  std::uint64_t entries = 0;           // members extracted (after the filter)
  std::uint64_t bytes = 0;             // file bytes written
  std::vector<std::string> top_level;  // sorted names of the top-level entries of dest
};

// Extracts `archive` into `dest`, which must not exist (its parent is created when missing).
// Writes into a temporary directory beside dest and renames it to dest at the end: on any error
// nothing is left (no dest, no temp). Nothing is fsynced: a crash may leave a partial dest.
// Hostile members (absolute or `..` paths, links leaving the tree, paths through symlinks,
// devices, setuid bits, type-changing duplicates, over-cap sizes) are Error::bad_input naming the
// archive and the member. Modes become 0755 (dirs, executables) or 0644; mtimes options.mtime.
// A duplicate regular-file member replaces the earlier one (tar's "last wins").
Expected<UnpackResult> unpack(const std::filesystem::path& archive,
                              const std::filesystem::path& dest, const UnpackOptions& options = {});

}  // namespace kiln::archive
