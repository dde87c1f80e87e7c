#include "manifest/debian_toolkit.h"

#include "core/hash.h"
#include "core/strings.h"
#include "manifest/toml_reader.h"

namespace kiln::manifest {

namespace {

DebianToolkitPins parse_debian_toolkit_text(const std::string& text,
                                            const std::string& display_path) {
  SourceText source{display_path, text};
  toml::table root = parse_toml(source);
  TableReader top(source, root, "", {"release", "suite", "deb"});
  DebianToolkitPins pins;
  pins.display_path = display_path;
  pins.release = top.required_string("release");
  if (!is_cuda_version(pins.release))
    top.fail("release", cat("bad CUDA release '", pins.release, "': expected MAJOR.MINOR"));
  pins.suite = top.required_string("suite");
  auto debs = top.tables("deb");
  if (debs.empty()) top.fail_missing("deb");
  for (const toml::table* d : debs) {
    TableReader dr(source, *d, "deb", {"path", "sha256"});
    CudaDeb deb{dr.required_string("path"), dr.required_string("sha256")};
    std::string why;
    if (!is_debian_pool_path(deb.path, why)) dr.fail("path", cat("bad pool path: ", why));
    if (!is_sha256_hex(deb.sha256))
      dr.fail("sha256", "bad sha256: expected 64 lowercase hexadecimal digits");
    for (const auto& other : pins.debs)
      if (other.package() == deb.package())
        dr.fail("path", cat("a second package ", deb.package()));
    pins.debs.push_back(std::move(deb));
  }
  return pins;
}

}  // namespace

Expected<DebianToolkitPins> parse_debian_toolkit(const std::string& text,
                                                 const std::string& display_path) {
  try {
    return parse_debian_toolkit_text(text, display_path);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<DebianToolkitPins> builtin_debian_toolkit() {
  return parse_debian_toolkit(kEmbeddedDebianToolkit, "<built-in cuda12-debian.toml>");
}

std::string debian_cuda_table(const DebianToolkitPins& pins, const std::string& version) {
  std::string out = cat("[cuda]\ntoolkit = \"debian\"\nversion = \"", version, "\"\n");
  out += cat("# CUDA ", pins.release, " from Debian ", pins.suite,
             " (same major, an older minor: CUDA's minor version compatibility)\n");
  for (const auto& d : pins.debs)
    out += cat("\n[[cuda.deb]]\npath = \"", d.path, "\"\nsha256 = \"", d.sha256, "\"\n");
  return out;
}

}  // namespace kiln::manifest
