// Check "elf": every DT_NEEDED is torch's, the CUDA runtime's, one auditwheel's policy for the
// wheel's platform tags lets it take from the system (library_policy.cpp) or a library bundled in
// the wheel; no RPATH/RUNPATH outside the wheel; absolute build paths baked
// into the binaries are reported (a warning: they are harmless to run but leak the build machine).
#include <algorithm>
#include <set>
#include <utility>

#include "core/namespace.h"
#include "core/strings.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace {

const std::set<std::string>& torch_libraries() {
  static const std::set<std::string> libs = {"libc10.so",        "libc10_cuda.so",
                                             "libtorch.so",      "libtorch_cpu.so",
                                             "libtorch_cuda.so", "libtorch_python.so"};
  return libs;
}

// Strings in the image that look like absolute paths of a build machine: those of the machine, and
// those under kiln's own build root (/tmp/kiln-build/<root key>/, the same on every machine).
std::pair<std::vector<std::string>, std::vector<std::string>> build_paths(std::string_view image) {
  static const std::string kMarkers[] = {std::string(kBuildRootsPath) + "/", "/root/", "/home/",
                                         "/tmp/pip-", "/tmp/tmp"};
  std::set<std::string> found;
  for (const std::string& marker : kMarkers) {
    std::string_view m(marker);
    for (std::size_t at = image.find(m); at != std::string_view::npos; at = image.find(m, at + 1)) {
      if (at > 0) {
        auto c = static_cast<unsigned char>(image[at - 1]);
        if (std::isalnum(c) || c == '.' || c == '_' || c == '-' || c == '/' || c == '~')
          continue;  // the tail of a longer path, seen from its own start (or not a path at all)
      }
      std::size_t end = at;
      while (end < image.size() && end - at < 200 &&
             std::isprint(static_cast<unsigned char>(image[end])) && image[end] != '"' &&
             image[end] != ' ')
        ++end;
      found.insert(std::string(image.substr(at, end - at)));
      if (found.size() >= 1000) break;
    }
  }
  std::pair<std::vector<std::string>, std::vector<std::string>> out;
  const std::string kilns = cat(kBuildRootsPath, "/");
  for (const auto& p : found) (p.rfind(kilns, 0) == 0 ? out.second : out.first).push_back(p);
  return out;
}

bool origin_relative(const std::string& entry) {
  return entry.rfind("$ORIGIN", 0) == 0 || entry.rfind("${ORIGIN}", 0) == 0;
}

}  // namespace

// The CUDA libraries torch's own dependencies (nvidia-* wheels) or the driver provide:
// lib<name>.so, then any number of ".N" (none of the names holds a dot).
bool is_cuda_library(std::string_view soname) {
  static const std::set<std::string_view> names = {
      "cudart",   "cublas",     "cublasLt", "cufft",          "cufftw",    "curand",     "cusolver",
      "cusparse", "cusparseLt", "nvrtc",    "nvrtc-builtins", "nvJitLink", "nvToolsExt", "cupti",
      "nccl",     "cudnn",      "cufile",   "nvshmem_host",   "cuda"};
  Scanner s(soname);
  if (!s.skip("lib") || !names.count(s.take_while([](char c) { return c != '.'; })) ||
      !s.skip(".so"))
    return false;
  while (s.skip('.'))
    if (s.take_while(is_ascii_digit).empty()) return false;
  return s.done();
}

CheckResult check_elf(const LoadedWheel& w) {
  if (!w.zip) return skipped("elf", "the archive is unreadable");
  Findings f("elf");
  for (const auto& e : w.elf_errors) f.fail(e);
  if (w.binaries.empty() && w.elf_errors.empty())
    return skipped("elf", "no ELF files (a pure wheel)");

  std::set<std::string> bundled;  // libraries inside the wheel, by soname and file name
  for (const auto& b : w.binaries) {
    if (!b.info.soname.empty()) bundled.insert(b.info.soname);
    bundled.insert(b.path.substr(b.path.rfind('/') + 1));
  }
  const std::set<std::string> system = allowed_system_libraries(w.name);
  nlohmann::json files = nlohmann::json::object();
  std::size_t path_count = 0;
  for (const auto& b : w.binaries) {
    nlohmann::json j = {{"needed", b.info.needed},
                        {"rpath", b.info.rpath},
                        {"runpath", b.info.runpath},
                        {"extension", b.extension}};
    for (const auto& n : b.info.needed) {
      if (torch_libraries().count(n) || system.count(n) || is_cuda_library(n) || bundled.count(n))
        continue;
      if (n.rfind("libpython", 0) == 0)
        f.fail(cat(b.path, " links ", n,
                   "; extension modules must not (the interpreter provides the C API)"));
      else
        f.fail(cat(b.path, " needs ", n, ", which is neither torch's, CUDA's, a system library ",
                   join(w.name.platform_tags, "."),
                   " allows (auditwheel's policy) nor in the wheel"));
    }
    for (const auto& [kind, value] :
         {std::pair<const char*, const std::string&>{"RPATH", b.info.rpath},
          std::pair<const char*, const std::string&>{"RUNPATH", b.info.runpath}}) {
      for (const auto& entry : split(value, ":"))
        if (!origin_relative(entry))
          f.fail(cat(b.path, " has ", kind, " ", entry,
                     ", which points outside the wheel (at the build machine)"));
    }
    auto [paths, kilns] = build_paths(b.data);
    j["build_paths"] = paths;
    j["kiln_build_root_paths"] = kilns.size();
    path_count += paths.size();
    if (!paths.empty()) {
      std::vector<std::string> shown(paths.begin(),
                                     paths.begin() + std::min<std::size_t>(paths.size(), 3));
      f.warn(cat(b.path, " holds ", paths.size(), " absolute build path(s), e.g. ",
                 join(shown, ", "),
                 " (they differ between build machines: build where the path is fixed, or map it "
                 "away with -ffile-prefix-map)"));
      for (const auto& p : paths) f.note(cat("  ", p));
    }
    if (!kilns.empty())
      f.note(cat(b.path, ": ", kilns.size(), " path(s) under kiln's fixed build root ",
                 kBuildRootsPath, " (the same on every machine: nothing to do)"));
    files[b.path] = std::move(j);
  }
  f.data()["files"] = std::move(files);
  f.data()["build_paths"] = path_count;
  return f.finish(cat(w.binaries.size(),
                      " ELF file(s): every DT_NEEDED is torch, CUDA or the C/C++ runtime; no "
                      "RPATH/RUNPATH outside the wheel; no build paths"));
}

}  // namespace kiln::validate
