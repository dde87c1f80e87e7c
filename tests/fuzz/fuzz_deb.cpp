// Debian packages (archive/deb.h: an ar archive whose data.tar goes through archive::unpack):
// whatever the package, nothing is created outside the destination, a failure leaves nothing at
// all (no destination, no temporary data member), and what is unpacked holds only plain files,
// directories and symlinks that stay inside. The filter is the Debian toolkit's kind: usr/ only,
// what it rejects skipped.
#include <sys/stat.h>

#include <fstream>
#include <set>

#include "archive/deb.h"
#include "fuzz.h"

namespace fs = std::filesystem;
using kiln::fuzz::fail;

namespace {

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

bool inside(const fs::path& root, const fs::path& path) {
  auto rel = path.lexically_normal().lexically_relative(root.lexically_normal());
  return !rel.empty() && *rel.begin() != "..";
}

void check_tree(const fs::path& root) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) fail("cannot walk the unpacked tree");
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0) fail("an unpacked path vanished");
    if (st.st_mode & (S_ISUID | S_ISGID | S_ISVTX))
      fail("a setuid, setgid or sticky mode was kept");
    std::string rel = it->path().lexically_relative(root).generic_string();
    if (!rel.starts_with("usr")) fail("a member the filter rejected was written: " + rel);
    if (S_ISLNK(st.st_mode)) {
      fs::path target = fs::read_symlink(it->path());
      if (target.is_absolute() || !inside(root, it->path().parent_path() / target))
        fail("a symlink leaves the destination: " + it->path().string() + " -> " + target.string());
    } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      fail("something other than a file, a directory or a symlink: " + it->path().string());
    }
  }
}

}  // namespace

KILN_FUZZ_TARGET(deb) {
  const fs::path box = kiln::fuzz::sandbox("deb");
  fs::path input = box / "input.deb";
  fs::path dest = box / "dest";
  {
    std::ofstream out(input, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  kiln::archive::UnpackOptions options;
  options.limits.max_total_bytes = 32u << 20;
  options.limits.max_entry_bytes = 16u << 20;
  options.limits.max_entries = 4096;
  options.filter = [](std::string_view p) { return p.starts_with("usr/"); };
  options.skip_rejected = true;
  kiln::archive::DebLimits limits;
  limits.max_data_bytes = 16u << 20;
  auto result = kiln::archive::unpack_deb(input, dest, options, limits);
  std::set<std::string> expected = {"input.deb"};
  if (result) expected.insert("dest");
  if (names_in(box) != expected)
    fail(result ? "something was written beside the destination"
                : "a failed unpack left something behind");
  if (result) {
    check_tree(dest);
    if (result->bytes > options.limits.max_total_bytes)
      fail("more bytes than the limit were written");
  } else if (result.error().message.empty()) {
    fail("an error without a message");
  }
  std::error_code ec;
  fs::remove_all(dest, ec);
  return 0;
}
