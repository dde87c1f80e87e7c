// Debian binary packages (.deb): an `ar` archive of exactly `debian-binary` ("2.x"),
// `control.tar[.gz|.xz|.zst]` and `data.tar[.gz|.xz|.zst|.bz2]`, in that order. Only this reader
// enables libarchive's ar format (archive::unpack keeps refusing ar); the data member goes through
// archive::unpack with every one of its checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "archive/unpack.h"
#include "core/expected.h"

namespace kiln::archive {

struct DebLimits {
  std::uint64_t max_data_bytes = 4ull << 30;      // the compressed data.tar member
  std::uint64_t max_control_bytes = 16ull << 20;  // the control.tar member (skipped)
};

// Extracts the files of `deb`'s data.tar into `dest`, which must not exist, through
// archive::unpack(options) (a filter with skip_rejected picks what a caller needs). The data
// member is copied to a temporary file beside dest first (removed on every way out). Anything but
// the three members above, in that order, of regular-file type and within `limits`, is
// Error::bad_input naming the package and the member; a truncated package too.
Expected<UnpackResult> unpack_deb(const std::filesystem::path& deb,
                                  const std::filesystem::path& dest, const UnpackOptions& options,
                                  const DebLimits& limits = {});

// Whether `name` is an ar member name a .deb may have in position `index` (0, 1, 2).
bool is_deb_member(std::size_t index, std::string_view name);

}  // namespace kiln::archive
