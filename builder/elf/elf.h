// ELF facts of shared objects (elfutils libelf): DT_NEEDED, RPATH/RUNPATH, versioned symbol
// requirements, dynamic symbols and named sections. Read from memory, so wheels need no unpacking.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::elf {

struct VersionNeed {
  std::string file;     // "libc.so.6"
  std::string version;  // "GLIBC_2.32"
};

struct Symbol {
  std::string name;
  std::string version;  // "GLIBC_2.2.5" for versioned references/definitions, else ""
  bool defined = false;
  bool weak = false;
  bool function = false;
};

struct Section {
  std::string name;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

struct ElfInfo {
  std::string soname;
  std::vector<std::string> needed;
  std::string rpath, runpath;
  std::vector<VersionNeed> version_needs;
  std::vector<Symbol> dynamic_symbols;
  std::vector<Section> sections;

  const Section* section(std::string_view name) const;
};

// Parses an ELF image held in memory (`name` is used in messages).
Expected<ElfInfo> read_elf(std::string_view image, std::string_view name);
Expected<ElfInfo> read_elf_file(const std::filesystem::path& path);

// Section bytes, bounds-checked against the image.
std::optional<std::string_view> section_bytes(std::string_view image, const Section& section);

}  // namespace kiln::elf
