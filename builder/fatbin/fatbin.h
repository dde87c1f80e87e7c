// CUDA fat binaries (the `.nv_fatbin` section of host objects): the containers and, per entry, its
// kind (SASS ELF or PTX), GPU arch with its a/f variant, code version, flags and compression.
//
// Layout (little-endian; as read by cuobjdump and documented by the open fatbinary readers):
//   container header, 16 bytes: u32 magic 0xBA55ED50, u16 version 1, u16 header size (16),
//                               u64 size of the entries that follow
//   entry header, >= 64 bytes:  u16 kind (1 PTX, 2 ELF), u16 (0x0101), u32 header size,
//                               u64 payload size, u32 compressed size, u32 options offset,
//                               u16 minor, u16 major (PTX ISA / cubin ABI version), u32 arch (90),
//                               u32 object name offset, u32 object name length, u64 flags,
//                               u64 reserved, u64 uncompressed size
//   then the payload; the next entry starts at header + header size + payload size.
// Flags: 0x1 64-bit, 0x2 debug, 0x10 Linux host, 0x2000 compressed (LZ-style, CUDA < 12.x),
// 0x8000 compressed (zstd), 0x100000 arch-specific ("a"), 0x200000 family-specific ("f").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::fatbin {

constexpr std::uint32_t kMagic = 0xBA55ED50;

enum class Kind { Ptx, Elf, Other };
enum class Compression { None, Lz, Zstd };

struct Entry {
  Kind kind = Kind::Other;
  std::uint16_t raw_kind = 0;
  int arch = 0;                              // 90, 100, 120
  char variant = 0;                          // 0, 'a' or 'f'
  int version_major = 0, version_minor = 0;  // PTX ISA version (PTX) or cubin ABI version (ELF)
  std::uint64_t flags = 0;
  Compression compression = Compression::None;
  std::uint64_t offset = 0;             // of the entry header, from the start of the section
  std::uint64_t header_size = 0;        // the payload starts at offset + header_size
  std::uint64_t payload_size = 0;       // bytes stored after the header (padding included)
  std::uint64_t compressed_size = 0;    // when compressed
  std::uint64_t uncompressed_size = 0;  // when compressed
  std::string object_name;              // the source object, when recorded

  bool compressed() const { return compression != Compression::None; }
  bool debug() const { return flags & 0x2; }
  // "sm_90a": the arch as nvcc and cuobjdump's -elf/-ptx name it (for PTX too).
  std::string arch_name() const;
  // "sm_90a" for SASS, "compute_120" for PTX.
  std::string code_name() const;
};

struct Container {
  std::uint64_t offset = 0;  // of the container header
  std::uint64_t size = 0;    // header included
  std::vector<Entry> entries;
};

// Parses every container of a `.nv_fatbin` section; `name` is used in messages. Containers may be
// separated by zero padding up to 8-byte alignment; anything else is an error.
Expected<std::vector<Container>> parse(std::string_view section, std::string_view name);

// Every entry of every container, in order.
std::vector<Entry> all_entries(const std::vector<Container>& containers);

// The entry's payload from `section`, decompressed when compressed (LZ4-style blocks or zstd) and
// then exactly `uncompressed_size` bytes; an uncompressed payload is returned as stored. Refuses a
// declared size over `max_size`.
Expected<std::string> payload(std::string_view section, const Entry& entry,
                              std::uint64_t max_size = std::uint64_t(1) << 32);

// The SM number a cubin's own ELF header records (e_flags), e.g. 90; an error when `cubin` is not
// a CUDA ELF image (ELFOSABI_CUDA) of an ABI version kiln knows.
Expected<int> cubin_arch(std::string_view cubin);

std::string kind_name(Kind kind);                       // "elf", "ptx", "other"
std::string compression_name(Compression compression);  // "none", "lz", "zstd"

}  // namespace kiln::fatbin
