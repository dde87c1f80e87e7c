#include "toolchain/python.h"

#include "core/json.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace {

constexpr const char* kProbe = R"(
import json, sys, sysconfig
v = sys.version_info
ft = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
tag = "cp%d%d" % (v[0], v[1])
print(json.dumps({
  "implementation": sys.implementation.name,
  "executable": sys.executable,
  "version": "%d.%d.%d" % (v[0], v[1], v[2]),
  "python_tag": tag,
  "abi_tag": tag + ("t" if ft else ""),
  "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or "",
  "include_dir": sysconfig.get_paths()["include"],
  "platlib": sysconfig.get_paths()["platlib"],
}))
)";

}  // namespace

nlohmann::json PythonInfo::identity() const {
  return {{"version", version}, {"abi_tag", abi_tag}, {"ext_suffix", ext_suffix}};
}

Expected<PythonInfo> probe_python(const std::string& interpreter) {
  if (find_program(interpreter).empty())
    return Error::failed(cat("Python interpreter '", interpreter, "' not found",
                             interpreter.find('/') == std::string::npos ? " on PATH" : ""));
  auto out = run_capture({interpreter, "-I", "-c", kProbe});
  if (!out)
    return Error::failed(cat("cannot query Python '", interpreter, "': ", out.error().message),
                         out.error().detail);
  nlohmann::json j = parse_json(*out);
  if (j.is_discarded() || !j.is_object())
    return Error::failed(cat("unexpected answer from Python '", interpreter, "'"),
                         tail_lines(*out, 5));
  if (j.value("implementation", "") != "cpython")
    return Error::failed(cat("Python '", interpreter, "' is ", j.value("implementation", "?"),
                             ": kiln builds for CPython"));
  PythonInfo info;
  info.executable = j.value("executable", "");
  info.version = j.value("version", "");
  info.python_tag = j.value("python_tag", "");
  info.abi_tag = j.value("abi_tag", "");
  info.ext_suffix = j.value("ext_suffix", "");
  info.include_dir = j.value("include_dir", "");
  info.platlib = j.value("platlib", "");
  return info;
}

}  // namespace kiln::toolchain
