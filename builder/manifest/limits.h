// Length caps on untrusted strings (docs/manifest.md, "Limits"). A manifest, a target, a command
// line or a foreign wheel's METADATA may hold a string of any length; kiln refuses one longer than
// a real value needs before it checks the value's form, and never prints it whole.
#pragma once

#include <cstddef>

namespace kiln::manifest {

// Names: a package's (`package.name`, `source.pypi`, NAME in a package spec, METADATA's Name), and
// Python module and package names (`build.packages`, `build.extension.name`).
inline constexpr std::size_t kMaxNameBytes = 200;
// Target names (the file's stem, `--target NAME`) and versions (`package.version`,
// `torch.version`, VERSION in NAME==VERSION).
inline constexpr std::size_t kMaxTargetNameBytes = 128;
inline constexpr std::size_t kMaxVersionBytes = 128;
// Requirement strings: `dependencies`, `requires-python`, METADATA's Requires-Dist and
// Requires-Python.
inline constexpr std::size_t kMaxRequirementBytes = 4096;
// URLs (`torch.index-url`).
inline constexpr std::size_t kMaxUrlBytes = 2048;
// Any other string value in a manifest or a target.
inline constexpr std::size_t kMaxStringBytes = 64 * 1024;

}  // namespace kiln::manifest
