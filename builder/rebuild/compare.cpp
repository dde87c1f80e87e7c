#include "rebuild/compare.h"

#include <map>
#include <set>

#include "archive/zip_reader.h"
#include "core/hash.h"
#include "core/strings.h"
#include "elf/elf.h"

namespace kiln::rebuild {

namespace fs = std::filesystem;

namespace {

bool is_elf(std::string_view bytes) {
  return bytes.size() >= 4 && bytes.substr(0, 4) ==
                                  "\x7f"
                                  "ELF";
}

// Each named section's bytes (sections without a name are left out).
std::map<std::string, std::string_view> sections_of(std::string_view image,
                                                    const elf::ElfInfo& info) {
  std::map<std::string, std::string_view> out;
  for (const auto& s : info.sections)
    if (!s.name.empty())
      if (auto bytes = elf::section_bytes(image, s)) out.emplace(s.name, *bytes);
  return out;
}

// The sections of two ELF images whose bytes differ, or that one of them lacks.
std::vector<std::string> differing_sections(std::string_view a, std::string_view b,
                                            const std::string& member) {
  auto ia = elf::read_elf(a, member), ib = elf::read_elf(b, member);
  if (!ia || !ib) return {"(not readable as ELF)"};
  auto sa = sections_of(a, *ia), sb = sections_of(b, *ib);
  std::vector<std::string> out;
  for (const auto& [name, bytes] : sa) {
    auto it = sb.find(name);
    if (it == sb.end())
      out.push_back(cat(name, " (only in the wheel)"));
    else if (it->second != bytes)
      out.push_back(name);
  }
  for (const auto& [name, bytes] : sb)
    if (!sa.count(name)) out.push_back(cat(name, " (only in the rebuild)"));
  return out;
}

std::string entry_sha256(const archive::ZipReader& zip, const archive::ZipEntry& e) {
  Sha256 h;
  auto read = zip.read_chunks(e, [&](std::string_view chunk) { h.update(chunk); });
  return read ? h.hex_digest() : cat("unreadable: ", read.error().message);
}

// A member both have, compared: nothing when equal.
Expected<std::optional<MemberDifference>> compare_member(const archive::ZipReader& a,
                                                         const archive::ZipEntry& ea,
                                                         const archive::ZipReader& b,
                                                         const archive::ZipEntry& eb) {
  if (ea.mode != eb.mode) return MemberDifference{ea.name, "mode", {}};
  if (ea.size == eb.size && ea.crc == eb.crc && entry_sha256(a, ea) == entry_sha256(b, eb))
    return std::nullopt;
  MemberDifference d{ea.name, "contents", {}};
  KILN_TRY(std::string ba, a.read(ea));
  KILN_TRY(std::string bb, b.read(eb));
  if (is_elf(ba) && is_elf(bb)) d.sections = differing_sections(ba, bb, ea.name);
  return d;
}

}  // namespace

Expected<Comparison> compare_wheels(const fs::path& wheel, const fs::path& rebuilt) {
  Comparison c;
  KILN_TRY(c.sha256, sha256_file(wheel));
  KILN_TRY(c.rebuilt_sha256, sha256_file(rebuilt));
  c.same = c.sha256 == c.rebuilt_sha256;
  if (c.same) return c;
  KILN_TRY(archive::ZipReader a, archive::ZipReader::open(wheel));
  KILN_TRY(archive::ZipReader b, archive::ZipReader::open(rebuilt, "the rebuilt wheel"));
  for (const auto& ea : a.entries()) {
    const archive::ZipEntry* eb = b.find(ea.name);
    if (!eb) {
      c.members.push_back({ea.name, "only in the wheel", {}});
      continue;
    }
    KILN_TRY(auto d, compare_member(a, ea, b, *eb));
    if (d) c.members.push_back(std::move(*d));
  }
  for (const auto& eb : b.entries())
    if (!a.find(eb.name)) c.members.push_back({eb.name, "only in the rebuild", {}});
  return c;
}

std::vector<std::string> summary(const Comparison& c, std::size_t max_lines) {
  std::vector<std::string> out;
  if (c.same) return out;
  if (c.members.empty())
    out.push_back(
        "every member is the same; the zip's structure differs (order, timestamps or "
        "compression)");
  for (const auto& d : c.members) {
    if (out.size() == max_lines) {
      out.push_back(cat("… and ", c.members.size() - max_lines, " more"));
      break;
    }
    std::string line = cat(d.member, ": ", d.what == "contents" ? "contents differ" : d.what);
    if (!d.sections.empty()) line += cat(" in ", join(d.sections, ", "));
    out.push_back(std::move(line));
  }
  return out;
}

}  // namespace kiln::rebuild
