// The host C++ compiler and its version.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::toolchain {

struct HostCompiler {
  std::string command;       // as the target names it ("g++")
  std::string path;          // resolved on PATH
  std::string version;       // -dumpfullversion: "12.2.0"
  std::string version_text;  // first line of --version
  nlohmann::json identity() const;
};

Expected<HostCompiler> probe_compiler(const std::string& command);

}  // namespace kiln::toolchain
