// Package manifests (TOML): parse_manifest on any text; a manifest that loads has a canonical form.
#include "fuzz.h"
#include "manifest/manifest.h"

KILN_FUZZ_TARGET(manifest) {
  std::string text(kiln::fuzz::text(data, size));
  auto m = kiln::manifest::parse_manifest(text, "/nonexistent/manifests/demo/1.0.toml",
                                          "manifests/demo/1.0.toml", "/nonexistent/patches");
  if (m) {
    (void)m->canonical().dump();
    if (m->normalized_name().empty()) kiln::fuzz::fail("a manifest loaded with an empty name");
  } else if (m.error().message.empty()) {
    kiln::fuzz::fail("an error without a message");
  }
  return 0;
}
