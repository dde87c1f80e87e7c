// CUDA fat binaries (.nv_fatbin sections): containers, entries and their payloads (LZ and zstd
// decompression), and the arch a cubin's ELF header records.
#include "fatbin/fatbin.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(fatbin) {
  std::string_view section = kiln::fuzz::text(data, size);
  auto containers = kiln::fatbin::parse(section, "fuzz.fatbin");
  if (!containers) {
    if (containers.error().message.empty()) fail("an error without a message");
    return 0;
  }
  for (const auto& c : *containers)
    if (c.offset > size || c.size > size - c.offset) fail("a container reaches past the section");
  for (const auto& e : kiln::fatbin::all_entries(*containers)) {
    if (e.offset > size || e.header_size > size - e.offset ||
        e.payload_size > size - e.offset - e.header_size)
      fail("an entry reaches past the section");
    (void)e.arch_name();
    (void)e.code_name();
    auto payload = kiln::fatbin::payload(section, e, 16u << 20);
    if (!payload) continue;
    if (e.compressed() && payload->size() != e.uncompressed_size)
      fail("a decompressed payload of another size");
    if (e.kind == kiln::fatbin::Kind::Elf) (void)kiln::fatbin::cubin_arch(*payload);
  }
  return 0;
}
