// Build targets (TOML): parse_target on any text; a target that loads has a canonical form and
// takes its own archs back.
#include "fuzz.h"
#include "manifest/target.h"

KILN_FUZZ_TARGET(target) {
  std::string text(kiln::fuzz::text(data, size));
  auto t = kiln::manifest::parse_target(text, "fuzz", "targets/fuzz.toml");
  if (t) {
    (void)t->canonical().dump();
    (void)t->interpreter();
    (void)t->torch_minor();
    auto again = kiln::manifest::with_archs(*t, t->archs);
    if (!(again.archs == t->archs)) kiln::fuzz::fail("with_archs changed the archs");
  } else if (t.error().message.empty()) {
    kiln::fuzz::fail("an error without a message");
  }
  return 0;
}
