#include "elf/elf.h"

#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <map>
#include <memory>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::elf {

namespace {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};

std::string cstr(Elf* e, std::size_t section, std::size_t offset) {
  const char* s = elf_strptr(e, section, offset);
  return s ? std::string(s) : std::string();
}

}  // namespace

const Section* ElfInfo::section(std::string_view name) const {
  for (const auto& s : sections)
    if (s.name == name) return &s;
  return nullptr;
}

std::optional<std::string_view> section_bytes(std::string_view image, const Section& section) {
  if (section.offset > image.size() || section.size > image.size() - section.offset)
    return std::nullopt;
  return image.substr(section.offset, section.size);
}

Expected<ElfInfo> read_elf(std::string_view image, std::string_view name) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Error::failed("libelf initialisation failed");
  // libelf does not modify the buffer with ELF_C_READ_MEMORY.
  std::unique_ptr<Elf, ElfCloser> e(elf_memory(const_cast<char*>(image.data()), image.size()));
  auto bad = [&](std::string_view what) {
    return Error::bad_input(
        cat(name, ": ", what, elf_errmsg(-1) ? cat(" (", elf_errmsg(-1), ")") : std::string()));
  };
  if (!e || elf_kind(e.get()) != ELF_K_ELF) return Error::bad_input(cat(name, ": not an ELF file"));
  GElf_Ehdr ehdr;
  if (!gelf_getehdr(e.get(), &ehdr)) return bad("bad ELF header");
  std::size_t shstrndx = 0;
  if (elf_getshdrstrndx(e.get(), &shstrndx) != 0) return bad("no section name table");

  ElfInfo info;
  std::map<std::size_t, std::string> version_names;  // versym index -> name
  Elf_Scn* dynsym = nullptr;
  Elf_Scn* versym = nullptr;
  std::size_t dynsym_link = 0;
  for (Elf_Scn* scn = elf_nextscn(e.get(), nullptr); scn; scn = elf_nextscn(e.get(), scn)) {
    GElf_Shdr shdr;
    if (!gelf_getshdr(scn, &shdr)) return bad("bad section header");
    info.sections.push_back(Section{cstr(e.get(), shstrndx, shdr.sh_name), shdr.sh_offset,
                                    shdr.sh_type == SHT_NOBITS ? 0 : shdr.sh_size});
    if (shdr.sh_type == SHT_NOBITS) continue;
    if (shdr.sh_offset > image.size() || shdr.sh_size > image.size() - shdr.sh_offset)
      return Error::bad_input(
          cat(name, ": section ", info.sections.back().name, " lies outside the file"));
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (!data) continue;
    switch (shdr.sh_type) {
      case SHT_DYNAMIC: {
        std::size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
        for (std::size_t i = 0; i < n; ++i) {
          GElf_Dyn dyn;
          if (!gelf_getdyn(data, static_cast<int>(i), &dyn)) break;
          if (dyn.d_tag == DT_NEEDED)
            info.needed.push_back(cstr(e.get(), shdr.sh_link, dyn.d_un.d_val));
          else if (dyn.d_tag == DT_SONAME)
            info.soname = cstr(e.get(), shdr.sh_link, dyn.d_un.d_val);
          else if (dyn.d_tag == DT_RPATH)
            info.rpath = cstr(e.get(), shdr.sh_link, dyn.d_un.d_val);
          else if (dyn.d_tag == DT_RUNPATH)
            info.runpath = cstr(e.get(), shdr.sh_link, dyn.d_un.d_val);
        }
        break;
      }
      case SHT_GNU_verneed: {
        std::size_t offset = 0;
        for (std::size_t i = 0; i < shdr.sh_info; ++i) {
          GElf_Verneed need;
          if (!gelf_getverneed(data, static_cast<int>(offset), &need)) break;
          std::string file = cstr(e.get(), shdr.sh_link, need.vn_file);
          std::size_t aux_offset = offset + need.vn_aux;
          for (std::size_t j = 0; j < need.vn_cnt; ++j) {
            GElf_Vernaux aux;
            if (!gelf_getvernaux(data, static_cast<int>(aux_offset), &aux)) break;
            std::string version = cstr(e.get(), shdr.sh_link, aux.vna_name);
            info.version_needs.push_back(VersionNeed{file, version});
            version_names[aux.vna_other & 0x7fff] = version;
            if (aux.vna_next == 0) break;
            aux_offset += aux.vna_next;
          }
          if (need.vn_next == 0) break;
          offset += need.vn_next;
        }
        break;
      }
      case SHT_GNU_verdef: {
        std::size_t offset = 0;
        for (std::size_t i = 0; i < shdr.sh_info; ++i) {
          GElf_Verdef def;
          if (!gelf_getverdef(data, static_cast<int>(offset), &def)) break;
          GElf_Verdaux aux;
          if (gelf_getverdaux(data, static_cast<int>(offset + def.vd_aux), &aux))
            version_names[def.vd_ndx & 0x7fff] = cstr(e.get(), shdr.sh_link, aux.vda_name);
          if (def.vd_next == 0) break;
          offset += def.vd_next;
        }
        break;
      }
      case SHT_DYNSYM:
        dynsym = scn;
        dynsym_link = shdr.sh_link;
        break;
      case SHT_GNU_versym:
        versym = scn;
        break;
      default:
        break;
    }
  }
  if (dynsym) {
    GElf_Shdr shdr;
    gelf_getshdr(dynsym, &shdr);
    Elf_Data* data = elf_getdata(dynsym, nullptr);
    Elf_Data* vdata = versym ? elf_getdata(versym, nullptr) : nullptr;
    std::size_t n = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (std::size_t i = 1; data && i < n; ++i) {
      GElf_Sym sym;
      if (!gelf_getsym(data, static_cast<int>(i), &sym)) break;
      Symbol s;
      s.name = cstr(e.get(), dynsym_link, sym.st_name);
      if (s.name.empty()) continue;
      s.defined = sym.st_shndx != SHN_UNDEF;
      s.weak = GELF_ST_BIND(sym.st_info) == STB_WEAK;
      s.function = GELF_ST_TYPE(sym.st_info) == STT_FUNC;
      GElf_Versym vs;
      if (vdata && gelf_getversym(vdata, static_cast<int>(i), &vs)) {
        auto it = version_names.find(vs & 0x7fff);
        if (it != version_names.end() && (vs & 0x7fff) > 1) s.version = it->second;
      }
      info.dynamic_symbols.push_back(std::move(s));
    }
  }
  return info;
}

Expected<ElfInfo> read_elf_file(const std::filesystem::path& path) {
  KILN_TRY(std::string image, read_file(path));
  return read_elf(image, path.filename().string());
}

}  // namespace kiln::elf
