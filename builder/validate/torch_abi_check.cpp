// Check "torch-abi": every undefined, non-weak dynamic symbol of the wheel's ELF files is defined
// by the torch libraries checked against, the CUDA libraries they need, the C/C++ runtime, a
// library in the wheel, or is the Python C API. Missing ones are listed demangled: they are the
// "undefined symbol: _ZN3c10…" an import would raise.
#include <cxxabi.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>

#include "archive/zip_reader.h"
#include "core/strings.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace fs = std::filesystem;

namespace {

// The exported symbols of one library: "name" for each definition, "name@version" for versioned
// ones.
struct SymbolTable {
  std::string soname;
  std::unordered_set<std::string> names;
  std::unordered_set<std::string> versioned;
};

// The symbols an ELF file defines (its soname left empty): a library's, or a file of the wheel's.
std::shared_ptr<SymbolTable> exported_symbols(const std::vector<elf::Symbol>& symbols) {
  auto table = std::make_shared<SymbolTable>();
  for (const auto& s : symbols) {
    if (!s.defined) continue;
    table->names.insert(s.name);
    if (!s.version.empty()) table->versioned.insert(cat(s.name, "@", s.version));
  }
  return table;
}

// Libraries are read once per process (a directory of wheels shares them), keyed by path, size and
// modification time.
Expected<std::shared_ptr<const SymbolTable>> load_symbols(const fs::path& path) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const SymbolTable>> cache;
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec) real = path;
  auto size = fs::file_size(real, ec);
  // (libc++ counts file times in __int128 nanoseconds: as a 64-bit number, as libstdc++ does.)
  auto mtime = static_cast<std::int64_t>(fs::last_write_time(real, ec).time_since_epoch().count());
  std::string key = cat(real.string(), "|", size, "|", mtime);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  KILN_TRY(archive::MappedFile mapped, archive::MappedFile::open(real));
  auto info = elf::read_elf(mapped.bytes(), path.string());
  if (!info) return Error::failed(cat("cannot read ", path.string(), ": ", info.error().message));
  auto table = exported_symbols(info->dynamic_symbols);
  table->soname = info->soname;
  std::lock_guard<std::mutex> lock(mutex);
  cache[key] = table;
  return std::shared_ptr<const SymbolTable>(table);
}

std::string demangle(const std::string& name) {
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || !out) return name;
  std::string s = out;
  std::free(out);
  return s;
}

bool is_python_api(const std::string& name) {
  return name.rfind("Py", 0) == 0 || name.rfind("_Py", 0) == 0;
}

fs::path find_library(const std::string& name, const std::vector<fs::path>& dirs) {
  std::error_code ec;
  for (const auto& d : dirs)
    if (fs::is_regular_file(d / name, ec)) return d / name;
  return {};
}

int major_of(const std::string& version) {
  return std::atoi(version.c_str());
}

// Whether a run of digits is `n` (leading zeros allowed; too long for an int is no match).
bool same_number(std::string_view digits, int n) {
  int value = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() && value == n;
}

}  // namespace

std::string_view cudart_major(std::string_view soname) {
  Scanner s(soname);
  if (!s.skip("libcudart.so.")) return {};
  std::string_view digits = s.take_while(is_ascii_digit);
  return s.done() ? digits : std::string_view();
}

std::vector<fs::path> default_library_dirs() {
  std::vector<fs::path> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    dirs.push_back(fs::path(home) / "lib64");
    dirs.push_back(fs::path(home) / "lib");
  }
  for (const char* d : {"/usr/local/cuda/lib64", "/usr/local/cuda/lib",
                        "/usr/local/cuda/targets/x86_64-linux/lib", "/lib/x86_64-linux-gnu",
                        "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/usr/local/lib"})
    dirs.emplace_back(d);
  return dirs;
}

namespace {

// Where the wheel's undefined symbols may come from, in the order they are looked up: the torch
// libraries, the CUDA and C/C++ runtime libraries found on this machine, the wheel's own files.
struct Providers {
  std::vector<std::pair<std::string, std::shared_ptr<const SymbolTable>>> tables;  // label, table
  std::vector<std::string> used;  // the files read, for the check's data

  // A library that cannot be read is a failure of its own (the symbols it defines then count as
  // missing).
  void add_file(const fs::path& file, const std::string& label, Findings& f) {
    auto table = load_symbols(file);
    if (!table) {
      f.fail(table.error().message);
      return;
    }
    tables.emplace_back(label, *table);
    used.push_back(file.string());
  }

  // Whether one of the tables defines `s`: a versioned need is met by that version, or by a
  // library without symbol versions.
  bool defines(const elf::Symbol& s) const {
    std::string key = s.version.empty() ? std::string() : cat(s.name, "@", s.version);
    for (const auto& [label, table] : tables) {
      if (s.version.empty() ? table->names.count(s.name) > 0
                            : (table->versioned.count(key) > 0 ||
                               (table->versioned.empty() && table->names.count(s.name) > 0)))
        return true;
    }
    return false;
  }
};

// The torch version kiln.json says the wheel was built against ("" when it says none).
std::string built_torch(const LoadedWheel& w) {
  return w.provenance && w.provenance->tools ? w.provenance->tools->torch.version : "";
}

// The libraries the binaries need beyond torch and themselves: the C/C++ runtime always, and each
// DT_NEEDED by name (the CUDA libraries). A libcudart of another major than torch's fails: the
// environments that have this torch provide torch's.
std::set<std::string> needed_libraries(const LoadedWheel& w, const toolchain::TorchSysroot& torch,
                                       const std::string& torch_name, Findings& f) {
  std::set<std::string> wanted = {"libc.so.6",     "libm.so.6",           "libstdc++.so.6",
                                  "libgcc_s.so.1", "libdl.so.2",          "libpthread.so.0",
                                  "librt.so.1",    "ld-linux-x86-64.so.2"};
  std::set<std::string> bundled;
  for (const auto& b : w.binaries) {
    if (!b.info.soname.empty()) bundled.insert(b.info.soname);
    bundled.insert(b.path.substr(b.path.rfind('/') + 1));
  }
  for (const auto& b : w.binaries)
    for (const auto& n : b.info.needed) {
      if (bundled.count(n) || n.rfind("libc10", 0) == 0 || n.rfind("libtorch", 0) == 0) continue;
      wanted.insert(n);
      std::string_view cudart = cudart_major(n);
      if (!cudart.empty() && !torch.cuda.empty() && !same_number(cudart, major_of(torch.cuda)))
        f.fail(cat(b.path, " needs ", n, " (CUDA ", cudart, ") but ", torch_name,
                   " is built with CUDA ", torch.cuda, ", whose environments provide libcudart.so.",
                   major_of(torch.cuda)));
    }
  return wanted;
}

// What the symbol checks found across the binaries, for the message and the check's data.
struct SymbolCounts {
  std::size_t resolved = 0, python = 0, unchecked = 0;
};

// One binary's undefined, non-weak symbols that nothing defines, demangled and sorted. The Python
// C API comes from the interpreter; a symbol versioned against a library not on this machine
// cannot be judged.
std::vector<std::string> missing_symbols(const Binary& b, const Providers& providers,
                                         const std::set<std::string>& unchecked_libs,
                                         SymbolCounts& counts) {
  std::map<std::string, std::string> version_file;  // version name -> library it is needed from
  for (const auto& v : b.info.version_needs) version_file[v.version] = v.file;
  std::vector<std::string> missing;
  for (const auto& s : b.info.dynamic_symbols) {
    if (s.defined || s.weak) continue;
    if (is_python_api(s.name)) {
      ++counts.python;
      continue;
    }
    if (providers.defines(s)) {
      ++counts.resolved;
      continue;
    }
    if (!s.version.empty() && unchecked_libs.count(version_file[s.version])) {
      ++counts.unchecked;
      continue;
    }
    missing.push_back(s.version.empty() ? demangle(s.name)
                                        : cat(demangle(s.name), " @", s.version));
  }
  std::sort(missing.begin(), missing.end());
  return missing;
}

}  // namespace

CheckResult check_torch_abi(const LoadedWheel& w, const Options& options) {
  const std::string id = "torch-abi";
  if (!w.readable()) return skipped(id, "the archive is unreadable");
  if (w.binaries.empty()) return skipped(id, "no ELF files (a pure wheel)");
  if (!options.torch)
    return skipped(id, options.torch_problem.empty()
                           ? "no torch to check against (the wheel has no kiln provenance: give "
                             "--target or --torch-version)"
                           : options.torch_problem);
  const toolchain::TorchSysroot& torch = *options.torch;
  std::string torch_name =
      cat("torch ", torch.version,
          options.torch_note.empty() ? "" : cat(" (", options.torch_note, ")"));
  Findings f(id);
  f.data()["torch"] = torch.version;
  f.data()["torch_cuda"] = torch.cuda;
  if (std::string built = built_torch(w); !built.empty() && built != torch.version)
    f.note(cat("built against torch ", built, "; checking against ", torch_name));

  Providers providers;
  std::error_code ec;
  for (const char* lib : {"libc10.so", "libc10_cuda.so", "libtorch.so", "libtorch_cpu.so",
                          "libtorch_cuda.so", "libtorch_python.so"})
    if (fs::exists(torch.lib_dir() / lib, ec)) providers.add_file(torch.lib_dir() / lib, lib, f);
  std::vector<fs::path> dirs =
      options.library_dirs.empty() ? default_library_dirs() : options.library_dirs;
  std::set<std::string> unchecked_libs;  // needed but not on this machine
  for (const auto& lib : needed_libraries(w, torch, torch_name, f)) {
    fs::path file = find_library(lib, dirs);
    if (file.empty())
      unchecked_libs.insert(lib);
    else
      providers.add_file(file, lib, f);
  }
  for (const auto& b : w.binaries)
    providers.tables.emplace_back(b.path, exported_symbols(b.info.dynamic_symbols));
  f.data()["libraries"] = providers.used;

  SymbolCounts counts;
  nlohmann::json missing_json = nlohmann::json::object();
  for (const auto& b : w.binaries) {
    std::vector<std::string> missing = missing_symbols(b, providers, unchecked_libs, counts);
    if (!missing.empty()) {
      std::vector<std::string> shown(missing.begin(),
                                     missing.begin() + std::min<std::size_t>(missing.size(), 3));
      f.fail(cat(b.path, ": ", missing.size(), " undefined symbol(s) not defined by ", torch_name,
                 ", CUDA or the C/C++ runtime: ", join(shown, "; ")));
      for (const auto& m : missing) f.note(cat("  missing: ", m));
    }
    missing_json[b.path] = missing;
  }
  for (const auto& lib : unchecked_libs)
    f.warn(cat(lib, " is not on this machine (looked in ", dirs.size(),
               " library directories); symbols versioned against it are unchecked"));
  f.data()["missing"] = missing_json;
  f.data()["resolved"] = counts.resolved;
  f.data()["python_api"] = counts.python;
  f.data()["unchecked"] = counts.unchecked;
  return f.finish(cat(counts.resolved, " undefined symbol(s) resolved against ", torch_name,
                      ", CUDA and the C/C++ runtime; ", counts.python, " from the Python C API"));
}

}  // namespace kiln::validate
