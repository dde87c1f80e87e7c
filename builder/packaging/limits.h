// Length caps on a stranger's names and versions (docs/manifest.md, "Limits"): kiln refuses one
// longer than a real value needs before it checks the value's form, and never prints it whole.
#pragma once

#include <cstddef>

namespace kiln::packaging {

// A project's name (`package.name`, `source.pypi`, NAME in a package spec, METADATA's Name), and
// Python module and package names (`build.packages`, `build.extension.name`).
inline constexpr std::size_t kMaxNameBytes = 200;
// A version (`package.version`, `torch.version`, VERSION in NAME==VERSION).
inline constexpr std::size_t kMaxVersionBytes = 128;

}  // namespace kiln::packaging
