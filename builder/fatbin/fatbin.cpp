#include "fatbin/fatbin.h"

#include <zstd.h>

#include <cstdio>

#include "core/bytes.h"
#include "core/strings.h"

namespace kiln::fatbin {

namespace {

constexpr std::uint32_t kRelocatableMagic = 0x466243B1;  // fatbins inside relocatable objects
constexpr std::size_t kContainerHeader = 16;
constexpr std::size_t kEntryHeader = 64;
constexpr std::uint64_t kFlagLz = 0x2000;
constexpr std::uint64_t kFlagZstd = 0x8000;
constexpr std::uint64_t kFlagArchSpecific = 0x100000;
constexpr std::uint64_t kFlagFamilySpecific = 0x200000;

std::string hex(std::uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// LZ4 block format as nvcc's "speed" compression writes it: tokens of (literal length, match
// length), literals, a 2-byte back offset; runs of 255 extend the lengths.
Expected<std::string> lz_decompress(std::string_view in, std::uint64_t expected,
                                    std::string_view name) {
  auto bad = [&](const char* what) {
    return Error::bad_input(cat(name, ": compressed fatbin entry: ", what));
  };
  std::string out;
  out.reserve(static_cast<std::size_t>(expected));
  std::size_t i = 0;
  while (i < in.size()) {
    auto token = static_cast<unsigned char>(in[i++]);
    std::uint64_t literals = token >> 4;
    if (literals == 15) {
      unsigned char more;
      do {
        if (i >= in.size()) return bad("literal length runs past the data");
        more = static_cast<unsigned char>(in[i++]);
        literals += more;
      } while (more == 255);
    }
    if (literals > in.size() - i) return bad("literals run past the data");
    if (literals > expected - out.size()) return bad("decompresses to more than its recorded size");
    out.append(in.substr(i, literals));
    i += literals;
    if (i >= in.size()) break;  // the last sequence has literals only
    if (in.size() - i < 2) return bad("truncated match offset");
    std::size_t back = static_cast<unsigned char>(in[i]) |
                       (static_cast<std::size_t>(static_cast<unsigned char>(in[i + 1])) << 8);
    i += 2;
    std::uint64_t length = (token & 0xf) + 4;
    if ((token & 0xf) == 15) {
      unsigned char more;
      do {
        if (i >= in.size()) return bad("match length runs past the data");
        more = static_cast<unsigned char>(in[i++]);
        length += more;
      } while (more == 255);
    }
    if (back == 0 || back > out.size()) return bad("match offset points before the start");
    if (length > expected - out.size()) return bad("decompresses to more than its recorded size");
    std::size_t from = out.size() - back;
    for (std::uint64_t k = 0; k < length; ++k) out += out[from + k];  // may overlap itself
  }
  if (out.size() != expected) return bad("decompresses to fewer bytes than its recorded size");
  return out;
}

}  // namespace

Expected<std::string> payload(std::string_view section, const Entry& e, std::uint64_t max_size) {
  std::string name = cat("fatbin entry at offset ", e.offset);
  if (e.offset > section.size() || e.header_size > section.size() - e.offset ||
      e.payload_size > section.size() - e.offset - e.header_size)
    return Error::bad_input(cat(name, " runs past the section"));
  std::string_view stored = section.substr(e.offset + e.header_size, e.payload_size);
  if (!e.compressed()) return std::string(stored);
  if (e.uncompressed_size > max_size)
    return Error::bad_input(cat(name, " claims ", e.uncompressed_size,
                                " uncompressed bytes, over the limit of ", max_size));
  std::string_view data = stored.substr(0, e.compressed_size);
  if (e.compression == Compression::Lz) return lz_decompress(data, e.uncompressed_size, name);
  std::string out(static_cast<std::size_t>(e.uncompressed_size), '\0');
  std::size_t n = ZSTD_decompress(out.data(), out.size(), data.data(), data.size());
  if (ZSTD_isError(n)) return Error::bad_input(cat(name, ": zstd: ", ZSTD_getErrorName(n)));
  if (n != out.size())
    return Error::bad_input(
        cat(name, " decompresses to ", n, " bytes; its header says ", out.size()));
  return out;
}

Expected<int> cubin_arch(std::string_view b) {
  if (b.size() < 64 || b.substr(0, 4) != std::string_view("\x7f"
                                                          "ELF",
                                                          4))
    return Error::bad_input("cubin: not an ELF image");
  if (b[4] != 2 || b[5] != 1)
    return Error::bad_input("cubin: not a little-endian 64-bit ELF image");
  if (read_le16(b, 18) != 190)
    return Error::bad_input(cat("cubin: machine ", read_le16(b, 18), " is not EM_CUDA (190)"));
  auto osabi = static_cast<unsigned char>(b[7]);
  std::uint32_t flags = read_le32(b, 48);
  if (osabi == 0x41) return static_cast<int>((flags >> 8) & 0xff);  // CUDA ELF ABI v8 (CUDA 12.8+)
  if (osabi == 0x33) return static_cast<int>(flags & 0xff);         // older CUDA ELF ABI
  return Error::bad_input(cat("cubin: unknown OS ABI ", static_cast<int>(osabi)));
}

std::string Entry::arch_name() const {
  return cat("sm_", arch, variant ? std::string(1, variant) : std::string());
}

std::string Entry::code_name() const {
  return cat(kind == Kind::Ptx ? "compute_" : "sm_", arch,
             variant ? std::string(1, variant) : std::string());
}

std::string kind_name(Kind kind) {
  switch (kind) {
    case Kind::Ptx:
      return "ptx";
    case Kind::Elf:
      return "elf";
    default:
      return "other";
  }
}

std::string compression_name(Compression c) {
  switch (c) {
    case Compression::Lz:
      return "lz";
    case Compression::Zstd:
      return "zstd";
    default:
      return "none";
  }
}

std::vector<Entry> all_entries(const std::vector<Container>& containers) {
  std::vector<Entry> out;
  for (const auto& c : containers) out.insert(out.end(), c.entries.begin(), c.entries.end());
  return out;
}

Expected<std::vector<Container>> parse(std::string_view b, std::string_view name) {
  std::vector<Container> out;
  const std::uint64_t size = b.size();
  std::uint64_t at = 0;
  while (at < size) {
    // Zero padding between containers (the linker aligns each one).
    if (b[at] == '\0') {
      std::uint64_t z = at;
      while (z < size && b[z] == '\0') ++z;
      if (z == size) break;
      if (z % 8 != 0 || z - at >= 16)
        return Error::bad_input(
            cat(name, ": unexpected bytes at offset ", z, " of the fatbin section"));
      at = z;
    }
    auto bad = [&](const std::string& what) {
      return Error::bad_input(cat(name, ": fatbin container at offset ", at, ": ", what));
    };
    if (size - at < kContainerHeader) return bad("truncated header");
    std::uint32_t magic = read_le32(b, at);
    if (magic != kMagic && magic != kRelocatableMagic)
      return bad(cat("bad magic ", hex(magic), " (want 0xba55ed50)"));
    std::uint16_t version = read_le16(b, at + 4);
    std::uint16_t header_size = read_le16(b, at + 6);
    std::uint64_t body = read_le64(b, at + 8);
    if (version != 1) return bad(cat("unknown version ", version));
    if (header_size < kContainerHeader || header_size > size - at)
      return bad(cat("bad header size ", header_size));
    if (body > size - at - header_size)
      return bad(
          cat("claims ", body, " bytes of entries; only ", size - at - header_size, " remain"));
    Container c;
    c.offset = at;
    c.size = header_size + body;
    std::uint64_t end = at + header_size + body;
    std::uint64_t p = at + header_size;
    while (p < end) {
      auto entry_bad = [&](const std::string& what) {
        return Error::bad_input(cat(name, ": fatbin entry at offset ", p, ": ", what));
      };
      if (end - p < kEntryHeader) return entry_bad("truncated header");
      Entry e;
      e.offset = p;
      e.raw_kind = read_le16(b, p);
      e.kind = e.raw_kind == 1 ? Kind::Ptx : e.raw_kind == 2 ? Kind::Elf : Kind::Other;
      std::uint32_t entry_header = read_le32(b, p + 4);
      e.header_size = entry_header;
      e.payload_size = read_le64(b, p + 8);
      std::uint32_t compressed = read_le32(b, p + 16);
      e.version_minor = read_le16(b, p + 24);
      e.version_major = read_le16(b, p + 26);
      e.arch = static_cast<int>(read_le32(b, p + 28));
      std::uint32_t name_offset = read_le32(b, p + 32), name_length = read_le32(b, p + 36);
      e.flags = read_le64(b, p + 40);
      std::uint64_t uncompressed = read_le64(b, p + 56);
      if (entry_header < kEntryHeader || entry_header > end - p)
        return entry_bad(cat("bad header size ", entry_header));
      if (e.payload_size > end - p - entry_header)
        return entry_bad(cat("payload of ", e.payload_size, " bytes runs past its container"));
      if (e.arch <= 0 || e.arch > 10000) return entry_bad(cat("implausible arch ", e.arch));
      if ((e.flags & kFlagArchSpecific) && (e.flags & kFlagFamilySpecific))
        return entry_bad("flagged both arch-specific and family-specific");
      e.variant = (e.flags & kFlagArchSpecific) ? 'a' : (e.flags & kFlagFamilySpecific) ? 'f' : 0;
      if ((e.flags & kFlagLz) && (e.flags & kFlagZstd))
        return entry_bad("flagged with two compressions");
      e.compression = (e.flags & kFlagZstd) ? Compression::Zstd
                      : (e.flags & kFlagLz) ? Compression::Lz
                                            : Compression::None;
      std::string_view payload = b.substr(p + entry_header, e.payload_size);
      if (e.compressed()) {
        if (compressed == 0 || compressed > e.payload_size)
          return entry_bad(cat("compressed size ", compressed, " does not fit its payload of ",
                               e.payload_size, " bytes"));
        e.compressed_size = compressed;
        e.uncompressed_size = uncompressed;
        if (e.compression == Compression::Zstd &&
            payload.substr(0, 4) != std::string_view("\x28\xb5\x2f\xfd", 4))
          return entry_bad("flagged zstd-compressed but its payload lacks the zstd magic");
      } else if (e.kind == Kind::Elf && payload.substr(0, 4) != std::string_view("\x7f"
                                                                                 "ELF",
                                                                                 4)) {
        return entry_bad(cat("ELF entry for sm_", e.arch, " does not hold an ELF image"));
      }
      if (name_length > 0) {
        if (name_offset > entry_header || name_length > entry_header - name_offset)
          return entry_bad("object name lies outside the entry header");
        std::string_view n = b.substr(p + name_offset, name_length);
        e.object_name = std::string(n.substr(0, n.find('\0')));
      }
      c.entries.push_back(std::move(e));
      p += entry_header + c.entries.back().payload_size;
    }
    out.push_back(std::move(c));
    at = end;
  }
  return out;
}

}  // namespace kiln::fatbin
