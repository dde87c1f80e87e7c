// Safe unpack (tar in every compression kiln accepts, and zip): whatever the archive, nothing is
// created outside the destination, a failure leaves nothing at all, and what is unpacked holds
// only plain files, directories and symlinks that stay inside.
#include "archive/unpack.h"
#include "fuzz.h"
#include "unpacked_tree.h"

namespace fs = std::filesystem;
using kiln::fuzz::fail;

KILN_FUZZ_TARGET(unpack) {
  const fs::path box = kiln::fuzz::sandbox("unpack");
  const fs::path input = kiln::fuzz::write_input(box, "input.archive", data, size);
  const fs::path dest = box / "dest";
  kiln::archive::UnpackOptions options;
  options.limits.max_total_bytes = 32u << 20;
  options.limits.max_entry_bytes = 16u << 20;
  options.limits.max_entries = 4096;
  auto result = kiln::archive::unpack(input, dest, options);
  kiln::fuzz::check_box(box, input, result.has_value());
  struct stat st;
  if (::lstat(input.c_str(), &st) != 0 || st.st_nlink != 1) fail("the archive file was linked to");
  if (result) {
    kiln::fuzz::check_tree(dest);
    if (result->bytes > options.limits.max_total_bytes)
      fail("more bytes than the limit were written");
  } else if (result.error().message.empty()) {
    fail("an error without a message");
  }
  std::error_code ec;
  fs::remove_all(dest, ec);
  return 0;
}
