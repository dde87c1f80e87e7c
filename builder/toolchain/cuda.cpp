#include "toolchain/cuda.h"

#include <charconv>
#include <cstdlib>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

// "12.8" -> 8; 0 when there is no minor.
int minor_of(const std::string& version) {
  std::size_t dot = version.find('.');
  return dot == std::string::npos ? 0 : std::atoi(version.c_str() + dot + 1);
}

}  // namespace

int CudaToolkit::major() const {
  return std::atoi(version.c_str());
}

nlohmann::json CudaToolkit::identity() const {
  return {{"version", version}, {"nvcc_version", version_text}};
}

std::string parse_nvcc_release(const std::string& version_text) {
  // The first "release N.N".
  std::string_view text = version_text;
  for (std::size_t at = text.find("release "); at != std::string_view::npos;
       at = text.find("release ", at + 1)) {
    Scanner s(text.substr(at + 8));
    if (!s.take_while(is_ascii_digit).empty() && s.skip('.') &&
        !s.take_while(is_ascii_digit).empty())
      return std::string(s.since(0));
  }
  return {};
}

Expected<void> check_cuda_matches(const CudaToolkit& toolkit, const std::string& wanted_version,
                                  const std::string& wanted_by) {
  int wanted_major = std::atoi(wanted_version.c_str());
  if (wanted_major != toolkit.major())
    return Error::failed(cat(wanted_by, " needs CUDA ", wanted_version, " but the toolkit at ",
                             toolkit.home.string(), " is CUDA ", toolkit.version,
                             ": install a CUDA ", wanted_major,
                             ".x toolkit and point CUDA_HOME at it"));
  // Same major, and the compiler's minor no newer than torch's: what the compiler emits then
  // needs no newer runtime than the one torch ships with.
  if (minor_of(toolkit.version) > minor_of(wanted_version))
    return Error::failed(cat(wanted_by, " was built with CUDA ", wanted_version,
                             " but the toolkit at ", toolkit.home.string(), " is CUDA ",
                             toolkit.version,
                             ": a compiler may be older within the major version, ",
                             "not newer (use CUDA ", wanted_major, ".0 to ", wanted_version, ")"));
  return {};
}

namespace {

// "12.4" -> {12, 4}; {-1, -1} when it is not MAJOR.MINOR.
std::pair<int, int> major_minor(std::string_view version) {
  Scanner s(version);
  std::string_view major = s.take_while(is_ascii_digit);
  if (major.empty() || major.size() > 3 || !s.skip('.')) return {-1, -1};
  std::string_view minor = s.take_while(is_ascii_digit);
  if (minor.empty() || minor.size() > 3 || !s.done()) return {-1, -1};
  return {std::atoi(std::string(major).c_str()), std::atoi(std::string(minor).c_str())};
}

}  // namespace

Expected<std::string> cuda_compatibility(const std::string& compiler, const std::string& torch) {
  auto [cm, cn] = major_minor(compiler);
  auto [tm, tn] = major_minor(torch);
  if (cm < 0 || tm < 0)
    return Error::bad_input(cat("cannot compare CUDA ", compiler, " with torch's CUDA ", torch,
                                ": expected MAJOR.MINOR"));
  if (cm != tm)
    return Error::bad_input(cat("the toolkit is CUDA ", compiler, " but torch is built with CUDA ",
                                torch, ": the majors must match (torch's runtime is libcudart.so.",
                                tm, ")"));
  if (cn > tn)
    return Error::bad_input(cat("the toolkit is CUDA ", compiler, ", newer than torch's CUDA ",
                                torch, ": an extension may need a runtime newer than torch's"));
  if (cn == tn) return cat("same CUDA release ", compiler);
  return cat("minor version compatibility: nvcc ", compiler, " <= torch's CUDA ", torch,
             ", same major ", cm, " (the extension needs libcudart.so.", cm,
             ", which torch's CUDA ", torch, " runtime provides)");
}

int host_config_gcc_max(std::string_view text) {
  for (std::size_t at = text.find("#if"); at != std::string_view::npos;
       at = text.find("#if", at + 1)) {
    Scanner s(text.substr(at + 3));
    if (s.skip_spaces().empty() || !s.skip("__GNUC__")) continue;
    s.skip_spaces();
    if (!s.skip('>')) continue;
    s.skip_spaces();
    std::string_view digits = s.take_while(is_ascii_digit);
    if (digits.empty()) continue;
    // White space holding a line break, then "#error ... unsupported GNU version" on one line.
    if (s.skip_spaces().find('\n') == std::string_view::npos || !s.skip("#error")) continue;
    if (s.take_while([](char c) { return c != '\n'; }).find("unsupported GNU version") ==
        std::string_view::npos)
      continue;
    int major = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), major);
    return ec == std::errc() ? major : 0;  // a number past int is no GCC major
  }
  return 0;
}

GccRange supported_gcc(const CudaToolkit& toolkit) {
  GccRange range;
  auto text = read_file(toolkit.home / "include" / "crt" / "host_config.h");
  if (!text) return range;
  range.max = host_config_gcc_max(*text);
  return range;
}

Expected<void> check_gcc_range(const GccRange& range, const std::string& cuda,
                               const std::string& where, const HostCompiler& cxx) {
  if (cxx.version_text.find("clang") != std::string::npos) return {};
  int major = std::atoi(cxx.version.c_str());
  if (major <= 0 || range.max == 0) return {};
  if (major < range.min || major > range.max)
    return Error::failed(cat("host compiler ", cxx.command, " ", cxx.version, " (", cxx.path,
                             ") is outside the GCC versions CUDA ", cuda, " supports (", range.min,
                             " to ", range.max, ", from ", where,
                             "): install a g++ in that range and name it in the target's "
                             "[compiler] cxx"));
  return {};
}

Expected<void> check_host_compiler(const CudaToolkit& toolkit, const HostCompiler& cxx) {
  return check_gcc_range(supported_gcc(toolkit), toolkit.version,
                         (toolkit.home / "include" / "crt" / "host_config.h").string(), cxx);
}

std::unique_ptr<CudaSource> make_cuda_source(const CudaRequest& request, const cache::Store* cache,
                                             FetchPinned fetch) {
  switch (request.toolkit) {
    case manifest::ToolkitKind::Wheels:
      return wheels_cuda_source(request, cache, std::move(fetch));
    case manifest::ToolkitKind::Debian:
      return debian_cuda_source(request, cache, std::move(fetch));
    case manifest::ToolkitKind::System:
      break;
  }
  return system_cuda_source(request);
}

}  // namespace kiln::toolchain
