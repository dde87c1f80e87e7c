// What `kiln cache gc` reclaims in <cache>/git: a mirror that pins no commit (what a fetch that
// failed or was killed before kiln removed it left), and the temporary pack files a killed fetch
// left in a mirror that otherwise serves. A mirror a fetch holds (the lock on its directory) is
// left alone, and nothing else in <cache>/git is touched.
#include <algorithm>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/lock.h"
#include "core/strings.h"

namespace kiln::cache {

namespace fs = std::filesystem;

namespace {

// A mirror pins a commit when refs/kiln/ holds one (a file named by 40 hex digits), loose or
// listed in packed-refs.
bool pins_a_commit(const fs::path& mirror) {
  std::error_code ec;
  for (fs::directory_iterator it(mirror / "refs" / "kiln", ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.size() == 40 && is_hex(name) && it->is_regular_file(ec) && !it->is_symlink(ec))
      return true;
  }
  auto packed = read_file(mirror / "packed-refs", 64u << 20);
  return packed && packed->find(" refs/kiln/") != std::string::npos;
}

}  // namespace

GcResult Store::gc_git_mirrors() const {
  GcResult removed;
  std::error_code ec;
  std::vector<fs::path> mirrors;
  for (const auto& d : fs::directory_iterator(root_ / "git", ec))
    if (is_sha256_hex(d.path().filename().string()) && d.is_directory(ec) && !d.is_symlink(ec))
      mirrors.push_back(d.path());
  for (const auto& mirror : mirrors) {
    auto lock = FileLock::try_acquire(mirror);
    if (!lock) continue;  // a fetch is writing it
    std::vector<fs::path> doomed;
    if (!pins_a_commit(mirror)) {
      doomed.push_back(mirror);
    } else {
      for (const auto& f : fs::directory_iterator(mirror / "objects" / "pack", ec))
        if (f.path().filename().string().starts_with("pack_git2_")) doomed.push_back(f.path());
    }
    for (const auto& path : doomed) {
      std::uint64_t bytes = tree_bytes(path);
      std::error_code rm;
      auto n = fs::remove_all(path, rm);
      if (!rm && n > 0) ++removed.items, removed.bytes += bytes;
    }
  }
  return removed;
}

}  // namespace kiln::cache
