// The target's Python: version, wheel tags, extension suffix and headers, read from the
// interpreter itself.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::toolchain {

struct PythonInfo {
  std::string executable;   // sys.executable
  std::string version;      // "3.11.7"
  std::string python_tag;   // "cp311"
  std::string abi_tag;      // "cp311" ("cp313t" when free-threaded)
  std::string ext_suffix;   // ".cpython-311-x86_64-linux-gnu.so"
  std::string include_dir;  // holds Python.h
  std::string platlib;      // site-packages of that interpreter

  nlohmann::json identity() const;  // what changes built bytes
};

Expected<PythonInfo> probe_python(const std::string& interpreter);

}  // namespace kiln::toolchain
