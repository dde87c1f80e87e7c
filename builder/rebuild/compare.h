// Two wheels compared, as `kiln rebuild --check` reports them: equal bytes, or which members
// differ and, for ELF members, which sections (a headline like diffoscope's, not a dump).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"

namespace kiln::rebuild {

struct MemberDifference {
  std::string member;  // its path in the wheels
  std::string what;    // "only in the wheel", "only in the rebuild", "contents", "mode"
  // An ELF member's sections whose bytes differ, or that only one of the two has (", only in …").
  std::vector<std::string> sections;
};

struct Comparison {
  bool same = false;  // the files' bytes are equal
  std::string sha256, rebuilt_sha256;
  std::vector<MemberDifference> members;  // in the wheel's order, then the rebuild's extra ones
};

// Reads both as zips (archive::ZipReader, with all its checks).
Expected<Comparison> compare_wheels(const std::filesystem::path& wheel,
                                    const std::filesystem::path& rebuilt);

// One line per difference ("causal_conv1d_cuda.so: contents differ in .text, .nv_fatbin"), at
// most `max_lines` (then "… and N more"); when no member differs but the bytes do, a line saying
// the zip's structure (order, timestamps, compression) differs.
std::vector<std::string> summary(const Comparison& c, std::size_t max_lines = 20);

}  // namespace kiln::rebuild
