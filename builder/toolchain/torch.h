// torch as a build sysroot: headers, libraries and the facts cpp_extension derives from them
// (version, CUDA version, C++11 ABI, which ABI defines this torch's cpp_extension passes), read
// from the pinned wheel's files without importing torch — or from a live Python environment.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::cache {
class Store;  // cache/store.h: where a pinned torch is unpacked
}  // namespace kiln::cache

namespace kiln::toolchain {

struct TorchSysroot {
  std::filesystem::path root;  // the torch package directory (holds include/, lib/)
  std::string version;         // "2.11.0+cu130"
  std::string cuda;            // "13.0" ("" for CPU builds)
  bool cxx11_abi = true;
  bool pass_abi_define = false;             // cpp_extension passes -D_GLIBCXX_USE_CXX11_ABI=
  std::vector<std::string> pybind_defines;  // e.g. -DPYBIND11_COMPILER_TYPE="_gcc" (old torch)
  // The C++ standard cpp_extension compiles extensions with, for g++ and for nvcc: "c++17" (torch
  // 2.11 and older), "c++20" (2.12 and newer), read from its own source.
  std::string cxx_std = "c++17";
  std::string nvcc_std = "c++17";
  std::string identity_sha256;  // the wheel's sha256, or a hash of the libraries

  std::vector<std::string> include_dirs() const;
  std::filesystem::path lib_dir() const { return root / "lib"; }
  // The -D flags this torch's cpp_extension adds besides TORCH_EXTENSION_NAME.
  std::vector<std::string> abi_flags() const;
  nlohmann::json identity() const;
};

// Unpacks include/, lib/ (the libraries extensions link), version.py and cpp_extension.py of the
// wheel once into the cache's sysroot for it (Store::ensure(cache::torch_sysroot(sha256))), then
// reads the facts from those files.
Expected<TorchSysroot> torch_from_wheel(const std::filesystem::path& wheel,
                                        const std::string& sha256, const cache::Store& cache);
// The facts of the sysroot `dir` the cache made from the wheel `sha256` (Store::find_made).
Expected<TorchSysroot> cached_torch_sysroot(const std::filesystem::path& dir,
                                            const std::string& sha256);
// Reads the facts from an unpacked torch package directory (used by both sources and by tests).
Expected<TorchSysroot> read_torch_sysroot(const std::filesystem::path& torch_dir);
// torch of a Python environment: asks the interpreter where torch is, then reads its files.
Expected<TorchSysroot> torch_from_environment(const std::string& interpreter);

// The string a Python file assigns to `name` ("__version__ = '2.11.0'", "cuda: Optional[str] =
// '13.0'"): the first such assignment, "" when there is none.
std::string py_string_var(std::string_view text, std::string_view name);
// The pybind11 ABI defines an old torch's cpp_extension passed, from the internals key baked into
// libtorch_python ("__pybind11_internals_v4_gcc_libstdcpp_cxxabi1011__"); empty when it has none.
std::vector<std::string> pybind_abi_defines(std::string_view libtorch_python);

// The standard a cpp_extension.py passes after `marker` ("common_cflags += ['-std=" for g++,
// "cuda_cflags = ['-std=" for nvcc): "c++20"; "" when the file has no such line.
std::string cpp_extension_std(std::string_view cpp_extension, std::string_view marker);

// The libraries kiln links extensions against, in cpp_extension's order.
const std::vector<std::string>& torch_link_libraries();

}  // namespace kiln::toolchain
