// Sources with one fixed time. cicc and cudafe++ put a hash of a source file's mtime into the
// module id, which names the file's internal entities in host and device code, and nvcc's
// -lineinfo writes the mtime into the line table of every cubin; patched or copied files have the
// time they were written. Both compiling backends give the tree one time before they compile.
#pragma once

#include <filesystem>

#include "core/expected.h"

namespace kiln::compile {

// Every regular file under `tree` (symlinks left alone) gets 1980-01-01 (kZipEpoch), the time of
// an unpacked sdist's files.
Expected<void> fix_mtimes(const std::filesystem::path& tree);

}  // namespace kiln::compile
