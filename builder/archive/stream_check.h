// The whole compressed stream of a tarball, checked to its end: libarchive stops reading at the
// tar end marker, before a gzip trailer (whose CRC and size it never checks) or the last check of
// an xz, bzip2 or zstd stream.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/expected.h"

namespace kiln::archive {

// Decompresses the stream read from `fd` (from its start; the file offset is not used) once more,
// discarding the output, and fails (Error::bad_input naming `archive_name`) when it is corrupt,
// truncated, followed by anything but zero padding (gzip), or decompresses to more than
// `max_bytes`. `filter` is libarchive's filter code (ARCHIVE_FILTER_GZIP, _XZ, _BZIP2, _ZSTD); any
// other needs no check.
Expected<void> check_compressed_stream(int fd, int filter, std::uint64_t max_bytes,
                                       std::string_view archive_name);

}  // namespace kiln::archive
