// Wheel file names (PEP 427, the binary distribution format):
// NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl read as packaging 26.4's parse_wheel_filename reads it,
// and written back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "packaging/version.h"

namespace kiln::packaging {

struct WheelFileName {
  std::string distribution;  // as written ("causal_conv1d")
  std::string project;       // PEP 503 normalised ("causal-conv1d")
  std::string version;       // as written
  Version parsed_version;    // what it reads as
  std::string build;         // "" when none
  std::vector<std::string> python_tags, abi_tags, platform_tags;  // the compressed tag sets

  // "PY-ABI-PLATFORM" as written ("cp312-cp312-manylinux_2_28_x86_64").
  std::string tag_text() const;
  // Every python-abi-platform combination, sorted, each once (packaging returns a frozenset).
  std::vector<std::string> tags() const;
};

// packaging's verdict and fields; the error (BadInput) names the file and why.
Expected<WheelFileName> parse_wheel_file_name(std::string_view filename);

// "NAME-VERSION-TAG.whl" with the name as a file name spells it (file_name_part).
std::string wheel_file_name(std::string_view name, std::string_view version, std::string_view tag);

}  // namespace kiln::packaging
