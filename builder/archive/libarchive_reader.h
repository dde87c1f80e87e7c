#pragma once
// A libarchive reader with one owner, for the formats kiln reads through libarchive.

#include <archive.h>

#include <cstddef>
#include <memory>

namespace kiln::archive {

struct ReadFree {
  void operator()(struct archive* a) const { archive_read_free(a); }
};
using ArchivePtr = std::unique_ptr<struct archive, ReadFree>;

inline constexpr std::size_t kReadBlock = 64 * 1024;  // what each read from the file asks for

}  // namespace kiln::archive
