// A stranger's kiln.json as `kiln rebuild` reads it: parse_provenance, then the manifest and the
// target written back as TOML from its canonical inputs (manifest/canonical_text). Whatever the
// input, the text written is TOML that the manifest and target loaders read (they may refuse it,
// with a message), and a manifest or target that loads has the canonical form it was written from.
#include <toml++/toml.h>

#include "fuzz.h"
#include "manifest/canonical_text.h"
#include "manifest/manifest.h"
#include "manifest/target.h"
#include "wheel/provenance.h"

using kiln::fuzz::fail;

namespace {

void check_error(const kiln::Error& e) {
  if (e.message.empty()) fail("an error without a message");
}

void check_toml(const std::string& text) {
  if (!toml::parse(text)) fail("canonical_text wrote what is not TOML");
}

void manifest_round_trip(const nlohmann::json& package, const kiln::wheel::RebuildRecipe& r) {
  kiln::manifest::SourcePlace place{r.source_url, r.source_size, "/nonexistent"};
  auto text = kiln::manifest::manifest_text(package, place);
  if (!text) return check_error(text.error());
  check_toml(*text);
  auto m = kiln::manifest::parse_manifest(*text, "/nonexistent/manifests/x/1.toml", "x/1.toml",
                                          "/nonexistent/patches");
  if (!m) return check_error(m.error());
  // What loads is written back the same: nothing the writer kept is read another way.
  auto again = kiln::manifest::manifest_text(m->canonical(), place);
  if (!again || *again != *text) fail("a manifest read back is written another way");
}

void target_round_trip(const nlohmann::json& target, const std::string& index_url) {
  auto text = kiln::manifest::target_text(target, index_url);
  if (!text) return check_error(text.error());
  check_toml(*text);
  auto t = kiln::manifest::parse_target(*text, "rebuild", "targets/rebuild.toml");
  if (!t) return check_error(t.error());
  auto again = kiln::manifest::target_text(t->canonical(), index_url);
  if (!again || *again != *text) fail("a target read back is written another way");
}

}  // namespace

KILN_FUZZ_TARGET(recipe) {
  auto p = kiln::wheel::parse_provenance(kiln::fuzz::text(data, size));
  if (!p) {
    check_error(p.error());
    return 0;
  }
  if (!p->rebuild || !p->inputs.is_object()) return 0;
  if (p->inputs.contains("package")) manifest_round_trip(p->inputs["package"], *p->rebuild);
  if (p->inputs.contains("target"))
    target_round_trip(p->inputs["target"], p->rebuild->torch_index_url);
  return 0;
}
