// Debian packages (archive/deb.h: an ar archive whose data.tar goes through archive::unpack):
// whatever the package, nothing is created outside the destination, a failure leaves nothing at
// all (no destination, no temporary data member), and what is unpacked holds only plain files,
// directories and symlinks that stay inside. The filter is the Debian toolkit's kind: usr/ only,
// what it rejects skipped.
#include "archive/deb.h"
#include "fuzz.h"
#include "unpacked_tree.h"

namespace fs = std::filesystem;
using kiln::fuzz::fail;

KILN_FUZZ_TARGET(deb) {
  const fs::path box = kiln::fuzz::sandbox("deb");
  const fs::path input = kiln::fuzz::write_input(box, "input.deb", data, size);
  const fs::path dest = box / "dest";
  kiln::archive::UnpackOptions options;
  options.limits.max_total_bytes = 32u << 20;
  options.limits.max_entry_bytes = 16u << 20;
  options.limits.max_entries = 4096;
  options.filter = [](std::string_view p) { return p.starts_with("usr/"); };
  options.skip_rejected = true;
  kiln::archive::DebLimits limits;
  limits.max_data_bytes = 16u << 20;
  auto result = kiln::archive::unpack_deb(input, dest, options, limits);
  kiln::fuzz::check_box(box, input, result.has_value());
  if (result) {
    kiln::fuzz::check_tree(dest, "usr");
    if (result->bytes > options.limits.max_total_bytes)
      fail("more bytes than the limit were written");
  } else if (result.error().message.empty()) {
    fail("an error without a message");
  }
  std::error_code ec;
  fs::remove_all(dest, ec);
  return 0;
}
