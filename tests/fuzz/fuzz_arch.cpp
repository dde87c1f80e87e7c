// Arch specs: any text parses or fails with a located error; what parses has a canonical form that
// parses back to the same list.
#include "fuzz.h"
#include "manifest/arch.h"

using kiln::manifest::ArchList;

KILN_FUZZ_TARGET(arch) {
  std::string_view spec = kiln::fuzz::text(data, size);
  ArchList list;
  kiln::manifest::ArchSpecError error;
  bool ok = ArchList::parse(spec, list, error);
  auto plain = ArchList::parse(spec);
  if (ok != static_cast<bool>(plain)) kiln::fuzz::fail("the two parse() overloads disagree");
  if (!ok) {
    if (error.offset > spec.size()) kiln::fuzz::fail("an error offset past the end of the spec");
    if (error.message.empty()) kiln::fuzz::fail("an error without a message");
    return 0;
  }
  std::string canonical = list.canonical();
  auto back = ArchList::parse(canonical);
  if (!back) kiln::fuzz::fail("the canonical form does not parse: " + canonical);
  if (!(*back == list)) kiln::fuzz::fail("the canonical form parses to other archs: " + canonical);
  if (back->canonical() != canonical) kiln::fuzz::fail("the canonical form is not a fixed point");
  (void)list.torch_arch_list();
  (void)list.slug();
  (void)list.gencode_flags();
  for (const auto& a : list.archs())
    if (!a.sass && !a.ptx) kiln::fuzz::fail("an arch with neither SASS nor PTX");
  return 0;
}
