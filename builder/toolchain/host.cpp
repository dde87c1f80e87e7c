#include "toolchain/host.h"

#include <unistd.h>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace {

std::string first_line(std::string_view text) {
  return std::string(trim(text.substr(0, text.find('\n'))));
}

// The linker `cxx` runs: its -print-prog-name=ld (a path, or a name found on PATH).
Expected<std::string> linker_version(const HostCompiler& cxx) {
  KILN_TRY(std::string ld, run_capture({cxx.path, "-print-prog-name=ld"}));
  ld = std::string(trim(ld));
  std::filesystem::path path = find_program(ld);
  if (path.empty())
    return Error::failed(cat("the linker of ", cxx.command, " (", ld, ") not found"));
  KILN_TRY(std::string text, run_capture({path.string(), "--version"}));
  return first_line(text);
}

// "2.36" from confstr's "glibc 2.36".
std::string glibc_version() {
  char buf[64] = {};
  if (::confstr(_CS_GNU_LIBC_VERSION, buf, sizeof buf) == 0) return "";
  std::string_view text(buf);
  return std::string(text.starts_with("glibc ") ? text.substr(6) : text);
}

}  // namespace

Expected<HostFacts> probe_host_facts(const HostCompiler& cxx, const CudaToolkit& cuda) {
  HostFacts facts;
  KILN_TRY(facts.ld, linker_version(cxx));
  facts.glibc = glibc_version();
  std::error_code ec;
  auto include = std::filesystem::canonical(cuda.home / "include", ec);
  if (!ec && std::filesystem::is_directory(include, ec)) {
    KILN_TRY(facts.cuda_include, tree_sha256(include));
  }
  return facts;
}

}  // namespace kiln::toolchain
