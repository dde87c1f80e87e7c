// ELF images (shared objects in wheels, read from memory with libelf): the facts kiln reads, the
// sections' bytes, and the fat binary when there is one.
#include "elf/elf.h"
#include "fatbin/fatbin.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(elf) {
  std::string_view image = kiln::fuzz::text(data, size);
  auto info = kiln::elf::read_elf(image, "fuzz.so");
  if (!info) {
    if (info.error().message.empty()) fail("an error without a message");
    return 0;
  }
  for (const auto& s : info->sections) {
    auto bytes = kiln::elf::section_bytes(image, s);
    if (bytes && (bytes->data() < image.data() ||
                  bytes->data() + bytes->size() > image.data() + image.size()))
      fail("section bytes outside the image");
    if (bytes && s.name == ".nv_fatbin") (void)kiln::fatbin::parse(*bytes, "fuzz.so");
  }
  (void)info->section(".nv_fatbin");
  return 0;
}
