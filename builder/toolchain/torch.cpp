#include "toolchain/torch.h"

#include "archive/unpack.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/process.h"
#include "core/strings.h"
#include "elf/elf.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kLibFiles = {"libc10.so",        "libc10_cuda.so",
                                            "libtorch.so",      "libtorch_cpu.so",
                                            "libtorch_cuda.so", "libtorch_python.so"};

}  // namespace

std::string py_string_var(std::string_view text, std::string_view name) {
  auto in_annotation = [](char c) {
    return is_ascii_alpha(c) || c == '_' || c == '[' || c == ']' || c == '.' || c == ' ';
  };
  auto is_quote = [](char c) { return c == '\'' || c == '"'; };
  for (std::size_t at = text.find(name); at != std::string_view::npos;
       at = text.find(name, at + 1)) {
    Scanner s(text.substr(at + name.size()));
    s.skip_spaces();
    if (s.skip(':')) {
      // ":" white space, then at least one annotation character (a blank counts as either).
      std::string_view blank = s.skip_spaces();
      if (s.take_while(in_annotation).empty() && !blank.ends_with(' ')) continue;
    }
    if (!s.skip('=')) continue;
    s.skip_spaces();
    if (!is_quote(s.peek())) continue;
    s.skip(s.peek());
    std::string_view value = s.take_while([&](char c) { return !is_quote(c); });
    if (s.done()) continue;  // no closing quote
    return std::string(value);
  }
  return {};
}

std::vector<std::string> pybind_abi_defines(std::string_view libtorch_python) {
  // The first __pybind11_internals_v<N>_<compiler>_<stdlib>_cxxabi<N>__ ([a-z]+ each).
  const std::string_view prefix = "__pybind11_internals_v";
  for (std::size_t at = libtorch_python.find(prefix); at != std::string_view::npos;
       at = libtorch_python.find(prefix, at + 1)) {
    Scanner s(libtorch_python.substr(at + prefix.size()));
    if (s.take_while(is_ascii_digit).empty() || !s.skip('_')) continue;
    std::string_view compiler = s.take_while(is_ascii_lower);
    if (compiler.empty() || !s.skip('_')) continue;
    std::string_view stdlib = s.take_while(is_ascii_lower);
    if (stdlib.empty() || !s.skip('_')) continue;
    std::size_t abi_at = s.pos();
    if (!s.skip("cxxabi") || s.take_while(is_ascii_digit).empty()) continue;
    std::string_view abi = s.since(abi_at);
    if (!s.skip("__")) continue;
    return {cat("-DPYBIND11_COMPILER_TYPE=\"_", compiler, "\""),
            cat("-DPYBIND11_STDLIB=\"_", stdlib, "\""), cat("-DPYBIND11_BUILD_ABI=\"_", abi, "\"")};
  }
  return {};
}

const std::vector<std::string>& torch_link_libraries() {
  static const std::vector<std::string> libs = {"c10",    "torch",    "torch_cpu", "torch_python",
                                                "cudart", "c10_cuda", "torch_cuda"};
  return libs;
}

std::vector<std::string> TorchSysroot::include_dirs() const {
  return {(root / "include").string(),
          (root / "include" / "torch" / "csrc" / "api" / "include").string()};
}

std::vector<std::string> TorchSysroot::abi_flags() const {
  std::vector<std::string> flags = pybind_defines;
  if (pass_abi_define) flags.push_back(cat("-D_GLIBCXX_USE_CXX11_ABI=", cxx11_abi ? 1 : 0));
  return flags;
}

nlohmann::json TorchSysroot::identity() const {
  return {{"version", version},
          {"cuda", cuda},
          {"cxx11_abi", cxx11_abi},
          {"abi_flags", abi_flags()},
          {"sha256", identity_sha256}};
}

Expected<TorchSysroot> read_torch_sysroot(const fs::path& torch_dir) {
  TorchSysroot t;
  t.root = torch_dir;
  KILN_TRY(std::string version_py, read_file(torch_dir / "version.py"));
  t.version = py_string_var(version_py, "__version__");
  t.cuda = py_string_var(version_py, "cuda");
  if (t.version.empty())
    return Error::failed(
        cat("cannot read torch's version from ", (torch_dir / "version.py").string()));
  std::error_code ec;
  if (!fs::is_directory(torch_dir / "include" / "torch", ec))
    return Error::failed(
        cat("torch at ", torch_dir.string(), " has no C++ headers (include/torch)"));
  // C++11 ABI: libc10 exports std::__cxx11 names only when built with it.
  auto c10 = elf::read_elf_file(torch_dir / "lib" / "libc10.so");
  if (!c10)
    return Error::failed(
        cat("cannot read ", (torch_dir / "lib" / "libc10.so").string(), ": ", c10.error().message));
  t.cxx11_abi = false;
  for (const auto& s : c10->dynamic_symbols)
    if (s.defined && s.name.find("__cxx11") != std::string::npos) {
      t.cxx11_abi = true;
      break;
    }
  // Which defines this torch's cpp_extension passes: read its own source.
  auto ext = read_file(torch_dir / "utils" / "cpp_extension.py");
  if (ext) {
    t.pass_abi_define = ext->find("-D_GLIBCXX_USE_CXX11_ABI") != std::string::npos;
    if (auto std = cpp_extension_std(*ext, "common_cflags += ['-std="); !std.empty())
      t.cxx_std = std;
    if (auto std = cpp_extension_std(*ext, "cuda_cflags = ['-std="); !std.empty()) t.nvcc_std = std;
    if (ext->find("_PYBIND11_COMPILER_TYPE") != std::string::npos) {
      // Old torch: the pybind11 ABI strings are baked into libtorch_python's internals key.
      auto py = read_file(torch_dir / "lib" / "libtorch_python.so");
      if (py) t.pybind_defines = pybind_abi_defines(*py);
    }
  }
  return t;
}

std::string cpp_extension_std(std::string_view text, std::string_view marker) {
  std::size_t at = text.find(marker);
  if (at == std::string_view::npos) return {};
  Scanner s(text.substr(at + marker.size()));
  if (!s.skip("c++")) return {};
  std::string_view digits = s.take_while(is_ascii_digit);
  if (digits.size() != 2 || !s.skip('\'')) return {};
  return cat("c++", digits);
}

namespace {

// What a build needs of torch's wheel: its headers, the libraries extensions link, version.py and
// cpp_extension.py.
bool sysroot_member(std::string_view path) {
  if (path.rfind("torch/include/", 0) == 0) return true;
  if (path == "torch/version.py" || path == "torch/utils/cpp_extension.py") return true;
  for (const auto& lib : kLibFiles)
    if (path == "torch/lib/" + lib) return true;
  return path == "torch/" || path == "torch/lib/" || path == "torch/utils/";
}

}  // namespace

Expected<TorchSysroot> torch_from_wheel(const fs::path& wheel, const std::string& sha256,
                                        const cache::Store& cache) {
  auto unpack = [&](const fs::path& dest, const fs::path&) -> Expected<void> {
    archive::UnpackOptions options;
    options.filter = sysroot_member;
    auto unpacked = archive::unpack(wheel, dest, options);
    if (!unpacked)
      return Error::failed(cat("cannot unpack torch from ", wheel.filename().string(), ": ",
                               unpacked.error().message));
    return {};
  };
  KILN_TRY(fs::path dir, cache.ensure(cache::torch_sysroot(sha256), unpack));
  return cached_torch_sysroot(dir, sha256);
}

Expected<TorchSysroot> cached_torch_sysroot(const fs::path& dir, const std::string& sha256) {
  KILN_TRY(TorchSysroot t, read_torch_sysroot(dir / "torch"));
  t.identity_sha256 = sha256;
  return t;
}

Expected<TorchSysroot> torch_from_environment(const std::string& interpreter) {
  // find_spec locates torch without importing it (importing needs a GPU driver on some hosts).
  auto out = run_capture({interpreter, "-c",
                          "import importlib.util, os; s = importlib.util.find_spec('torch'); "
                          "print(os.path.dirname(s.origin) if s else '')"});
  if (!out)
    return Error::failed(cat("cannot query ", interpreter, " for torch: ", out.error().message));
  std::string dir(trim(*out));
  if (dir.empty())
    return Error::failed(cat("torch is not installed in the environment of ", interpreter));
  KILN_TRY(TorchSysroot t, read_torch_sysroot(dir));
  // version.py names the exact build (version, CUDA version, git commit): cheap and precise,
  // where hashing the libraries would cost seconds on every resolve.
  KILN_TRY(std::string version_py, read_file(fs::path(dir) / "version.py"));
  t.identity_sha256 = sha256_hex(version_py);
  return t;
}

}  // namespace kiln::toolchain
