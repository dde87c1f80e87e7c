// Length caps on untrusted strings (docs/manifest.md, "Limits"). A manifest, a target, a command
// line or a foreign wheel's METADATA may hold a string of any length; kiln refuses one longer than
// a real value needs before it checks the value's form, and never prints it whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "packaging/limits.h"

namespace kiln::manifest {

// Names and versions: packaging/limits.h.
using packaging::kMaxNameBytes;
using packaging::kMaxVersionBytes;
// Target names (the file's stem, `--target NAME`).
inline constexpr std::size_t kMaxTargetNameBytes = 128;
// Requirement strings: `dependencies`, `requires-python`, METADATA's Requires-Dist and
// Requires-Python.
inline constexpr std::size_t kMaxRequirementBytes = 4096;
// URLs (`torch.index-url`).
inline constexpr std::size_t kMaxUrlBytes = 2048;
// Any other string value in a manifest or a target.
inline constexpr std::size_t kMaxStringBytes = 64 * 1024;
// A wheel's text files, each read whole: METADATA, WHEEL, RECORD and kiln.json of a foreign wheel
// (`kiln validate`), of an installed distribution (`kiln doctor`), of a cached wheel (METADATA for
// PEP 658) and of a remote cache's wheel (kiln.json). Refused by the size a zip's directory
// states before anything is inflated, and again while inflating (a directory that lies); errors
// name the limit as kWheelTextLimit says it.
inline constexpr std::uint64_t kMaxWheelTextBytes = std::uint64_t(16) << 20;
inline constexpr std::string_view kWheelTextLimit = "16 MiB (the limit for a wheel's text files)";

}  // namespace kiln::manifest
