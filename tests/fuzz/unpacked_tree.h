// The invariants of an unpack that fuzz_unpack and fuzz_deb share: only the destination is
// written beside the input, and the tree holds only plain files, directories and symlinks that
// stay inside, with no setuid, setgid or sticky mode.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>

#include "fuzz.h"

namespace kiln::fuzz {

// `data` into <box>/<name>.
inline std::filesystem::path write_input(const std::filesystem::path& box, const char* name,
                                         const std::uint8_t* data, std::size_t size) {
  std::filesystem::path input = box / name;
  std::ofstream out(input, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return input;
}

// The box holds the input, and the destination "dest" exactly when the unpack succeeded.
inline void check_box(const std::filesystem::path& box, const std::filesystem::path& input,
                      bool unpacked) {
  std::set<std::string> names, expected = {input.filename().string()};
  if (unpacked) expected.insert("dest");
  for (const auto& e : std::filesystem::directory_iterator(box))
    names.insert(e.path().filename().string());
  if (names != expected)
    fail(unpacked ? "something was written beside the destination"
                  : "a failed unpack left something behind");
}

inline bool inside(const std::filesystem::path& root, const std::filesystem::path& path) {
  auto rel = path.lexically_normal().lexically_relative(root.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

// Every path of the tree starts with `prefix` (what the filter let through).
inline void check_tree(const std::filesystem::path& root, std::string_view prefix = "") {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) fail("cannot walk the unpacked tree");
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) fail("an unpacked path vanished");
    if (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX))
      fail("a setuid, setgid or sticky mode was kept");
    std::string rel = it->path().lexically_relative(root).generic_string();
    if (!rel.starts_with(prefix)) fail("a member the filter rejected was written: " + rel);
    if (S_ISLNK(st.st_mode)) {
      fs::path target = fs::read_symlink(it->path());
      if (target.is_absolute() || !inside(root, it->path().parent_path() / target))
        fail("a symlink leaves the destination: " + it->path().string() + " -> " + target.string());
    } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      fail("something other than a file, a directory or a symlink: " + it->path().string());
    }
  }
}

}  // namespace kiln::fuzz
