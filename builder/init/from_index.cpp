#include "init/from_index.h"

#include <algorithm>

#include "archive/zip_reader.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "elf/elf.h"
#include "fatbin/fatbin.h"
#include "init/cuda_wheels.h"
#include "init/requirements.h"
#include "init/toml_text.h"
#include "manifest/debian_toolkit.h"
#include "manifest/target.h"
#include "manifest/toolkit.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/torch.h"

namespace kiln::init {

namespace fs = std::filesystem;
using fetch::IndexFile;

namespace {

Expected<std::vector<IndexFile>> page_of(fetch::Downloader& downloader, const std::string& index,
                                         const std::string& project) {
  fetch::Context context{downloader, index};
  return fetch::read_project_page(context, project);
}

// PEP 658: the wheel's METADATA, served beside it; checked against the sha256 the index gives.
Expected<std::string> served_metadata(fetch::Downloader& downloader, const IndexFile& file) {
  std::string url = file.url + ".metadata";
  KILN_TRY(fetch::HttpResponse got, downloader.get_text(url, {}));
  if (!got.ok())
    return Error::failed(cat("cannot read ", fetch::redact_url(url), ": ", got.describe()));
  if (!file.metadata_sha256.empty() && sha256_hex(got.body) != file.metadata_sha256)
    return Error::failed(cat("the metadata of ", file.filename, " at ", fetch::redact_url(url),
                             " does not match the sha256 the index gives for it"));
  KILN_CHECK(check_requires_dist(got.body, fetch::redact_url(url)));
  return got.body;
}

}  // namespace

namespace {

// What kiln learnt about the torch release.
struct TorchFacts {
  std::string cuda;     // "13.2"
  std::string release;  // "13.2.2": the CUDA toolkit release torch pins, "" when none
  std::string source;   // where `cuda` was read
  std::optional<toolchain::TorchSysroot> sysroot;  // when a wheel was downloaded and unpacked
};

// The wheel to read: the one for `prefer`, else the first.
const TorchFile& pick(const std::vector<TorchFile>& files, const std::string& prefer) {
  for (const TorchFile& f : files)
    if (f.python_tag == prefer) return f;
  return files.front();
}

// The whole wheel: downloaded (verified) into the download cache and its torch unpacked, as a build
// would; CUDA from torch/version.py, checked against the metadata's pin.
Expected<void> read_wheel(fetch::Downloader& downloader, const IndexFile& file, TorchFacts& facts) {
  log::info(cat("reading ", file.filename, " (", file.size ? cat(*file.size >> 20, " MiB") : "",
                ") for torch's CUDA version"));
  KILN_TRY(fetch::CachedFile got,
           downloader.fetch(file.url, file.filename, file.sha256, file.size));
  KILN_TRY(std::string metadata, wheel_metadata(got.path, false));
  KILN_CHECK(
      check_requires_dist(metadata, cat(fetch::redact_url(file.url), " (", file.filename, ")")));
  KILN_TRY(toolchain::TorchSysroot sysroot,
           toolchain::torch_from_wheel(got.path, file.sha256, downloader.store()));
  auto pinned = cuda_from_metadata(metadata);
  if (pinned && !sysroot.cuda.empty() && pinned->version != sysroot.cuda)
    return Error::failed(cat(file.filename, ": torch/version.py says CUDA ", sysroot.cuda,
                             " but its metadata pins ", pinned->source));
  facts.cuda = sysroot.cuda;
  facts.source = cat(file.filename, ": torch/version.py (cuda = '", sysroot.cuda, "')");
  if (pinned) facts.release = pinned->release;
  facts.sysroot = std::move(sysroot);
  return {};
}

Expected<TorchFacts> torch_facts(const IndexRequest& request, fetch::Downloader& downloader,
                                 const std::vector<TorchFile>& files) {
  TorchFacts facts;
  const IndexFile& file = pick(files, request.prefer_tag).file;
  bool need_wheel = request.archs == "torch";
  if (file.has_metadata && !need_wheel) {
    KILN_TRY(std::string metadata, served_metadata(downloader, file));
    if (auto cuda = cuda_from_metadata(metadata)) {
      facts.cuda = cuda->version;
      facts.release = cuda->release;
      facts.source = cat(file.filename, ".metadata: ", cuda->source);
      return facts;
    }
  }
  KILN_CHECK(read_wheel(downloader, file, facts));
  if (facts.cuda.empty())
    return Error::failed(cat("torch ", request.torch_version, " (", file.filename,
                             ") is a CPU build: kiln builds CUDA extensions; pick a CUDA build ",
                             "(e.g. from https://download.pytorch.org/whl/cu128)"));
  return facts;
}

}  // namespace

namespace {

// The compiler's toolkit, chosen apart from torch's CUDA.
struct ToolkitChoice {
  manifest::ToolkitKind kind;
  std::string release;  // the CUDA release that compiles ("13.2"), for the arch limits
  std::vector<manifest::CudaWheel> wheels;
  std::string note;         // what it is, for the file's comment
  std::string cuda_table;   // the whole [cuda] table, when the source writes its own
  toolchain::GccRange gcc;  // the host compilers it takes (max 0: known once it is laid out)
  std::string gcc_from;     // the host_config.h that says so
  std::string host_note;    // the host compilers it takes, for the file's comment
};

int major_of(const std::string& version) {
  return std::atoi(version.c_str());
}

Expected<ToolkitChoice> system_toolkit(const TorchFacts& facts, const std::string& torch) {
  ToolkitChoice tk{manifest::ToolkitKind::System, facts.cuda, {}, ""};
  auto found = toolchain::detect_cuda("");
  if (!found) {
    log::warn(cat("no CUDA toolkit on this machine (", found.error().message,
                  "): the build machine needs CUDA ", major_of(facts.cuda), ".0 to ", facts.cuda));
    tk.note = cat("the build machine's CUDA ", major_of(facts.cuda), ".0 to ", facts.cuda);
    return tk;
  }
  // The target may be meant for another build host: a mismatch here is a warning; the build
  // checks the toolkit it runs.
  if (auto fits = toolchain::check_cuda_matches(*found, facts.cuda, cat("torch ", torch)); !fits) {
    log::warn(cat(fits.error().message, " (the build machine needs a fitting one)"));
    tk.note = cat("the build machine's CUDA ", major_of(facts.cuda), ".0 to ", facts.cuda);
    return tk;
  }
  tk.release = found->version;
  tk.note = cat("the system's CUDA ", found->version, " (", found->home.string(), " here)");
  tk.gcc = toolchain::supported_gcc(*found);
  tk.gcc_from = (found->home / "include" / "crt" / "host_config.h").string();
  return tk;
}

// Debian's CUDA 12 packages, as built into kiln (manifests/tools/cuda12-debian.toml).
Expected<ToolkitChoice> debian_toolkit(const IndexRequest& r, const TorchFacts& facts) {
  KILN_TRY(manifest::DebianToolkitPins pins, manifest::builtin_debian_toolkit());
  std::string note = cat("Debian ", pins.suite, "'s CUDA ", pins.release, " packages");
  if (major_of(facts.cuda) != major_of(pins.release))
    return Error::bad_input(cat("torch ", r.torch_version, " was built with CUDA ", facts.cuda,
                                "; ", note, " build for CUDA ", major_of(pins.release),
                                " only (use --toolkit wheels or system)"));
  ToolkitChoice tk{manifest::ToolkitKind::Debian, pins.release, {}, note};
  tk.cuda_table = manifest::debian_cuda_table(pins, facts.cuda);
  return tk;
}

// NVIDIA's compiler wheels at the release torch pins (CUDA 13 and later).
Expected<ToolkitChoice> wheels_toolkit(const IndexRequest& r, fetch::Downloader& downloader,
                                       const TorchFacts& facts) {
  int major = major_of(facts.cuda);
  if (major < 13)
    return Error::bad_input(
        cat("torch ", r.torch_version, " was built with CUDA ", facts.cuda, ", and NVIDIA ",
            "publishes no CUDA ", major, " compiler as wheels (nvidia-cuda-nvcc-cu", major,
            " holds only ptxas): use --toolkit debian (Debian's CUDA 12 packages) or --toolkit ",
            "system (a CUDA ", major, " toolkit on the build machine)"));
  KILN_TRY(ToolkitWheels w,
           cuda_toolkit_wheels(downloader, r.cuda_index, facts.cuda, facts.release));
  std::vector<std::string> parts = split(w.release, ".");
  return ToolkitChoice{manifest::ToolkitKind::Wheels,
                       cat(parts.at(0), ".", parts.size() > 1 ? parts[1] : "0"),
                       std::move(w.wheels),
                       cat("NVIDIA's CUDA ", w.release, " wheels"),
                       "",
                       w.gcc,
                       w.gcc_from};
}

Expected<ToolkitChoice> choose_toolkit(const IndexRequest& r, fetch::Downloader& downloader,
                                       const TorchFacts& facts) {
  int major = major_of(facts.cuda);
  using manifest::ToolkitKind;
  auto kind = r.toolkit.empty()
                  ? std::optional(major >= 13 ? ToolkitKind::Wheels : ToolkitKind::Debian)
                  : manifest::parse_toolkit_kind(r.toolkit);
  if (!kind)
    return Error::bad_input(cat("bad --toolkit '", printable_excerpt(r.toolkit), "': expected ",
                                manifest::toolkit_names()));
  if (*kind == ToolkitKind::System) return system_toolkit(facts, r.torch_version);
  if (*kind == ToolkitKind::Debian) return debian_toolkit(r, facts);
  return wheels_toolkit(r, downloader, facts);
}

// The host compilers the toolkit takes, for the file's comment; a g++ here (the target's compiler)
// outside them is warned of, as the target may be meant for another build machine: its build
// refuses that compiler.
std::string host_compiler_note(const ToolkitChoice& tk) {
  if (tk.gcc.max == 0) return "";
  auto cxx = toolchain::probe_compiler("g++");
  if (cxx) {
    if (auto fits = toolchain::check_gcc_range(tk.gcc, tk.release, tk.gcc_from, *cxx); !fits)
      log::warn(cat(fits.error().message, " (the build machine needs one in range)"));
  }
  return cat("; its nvcc takes g++ ", tk.gcc.min, " to ", tk.gcc.max, " as host compiler");
}

Expected<manifest::ArchList> requested_archs(const IndexRequest& r, const TorchFacts& facts) {
  if (r.archs == "torch") {
    if (!facts.sysroot) return Error::failed("--archs torch: torch's libraries were not read");
    return archs_of_library(facts.sysroot->lib_dir() / "libtorch_cuda.so");
  }
  auto archs = manifest::ArchList::parse(r.archs);
  if (!archs) return Error::bad_input(cat("--archs: ", archs.error().message));
  return archs;
}

// [python]: the one CPython asked for ("3.12"), else the machine's python3.
std::string python_table(const IndexRequest& r) {
  if (r.python_tags.size() == 1 && !r.python_tags[0].ends_with("t"))
    return cat("[python]\nversion = ", toml_string(cat("3.", r.python_tags[0].substr(3))), "\n");
  return "[python]\ninterpreter = \"python3\"\n";
}

std::string torch_table(const IndexRequest& r, const std::vector<TorchFile>& files) {
  std::string out = cat("[torch]\nversion = ", toml_string(r.torch_version), "\n");
  if (r.write_index) out += cat("index-url = ", toml_string(r.torch_index), "\n");
  out += "\n# One pinned wheel per CPython ABI; kiln takes the one matching the interpreter.\n";
  for (const TorchFile& f : files)
    out += cat("[[torch.wheel]]\npython = ", toml_string(f.python_tag),
               "\nfile = ", toml_string(f.file.filename), "\nsha256 = ", toml_string(f.file.sha256),
               "\n\n");
  return out;
}

std::string cuda_table(const TorchFacts& facts, const ToolkitChoice& tk) {
  if (!tk.cuda_table.empty()) return tk.cuda_table;
  std::string out = cat("[cuda]\ntoolkit = ", toml_string(manifest::toolkit_name(tk.kind)),
                        "\nversion = ", toml_string(facts.cuda), "\n");
  for (const auto& w : tk.wheels)
    out += cat("\n[[cuda.wheel]]\nfile = ", toml_string(w.file),
               "\nsha256 = ", toml_string(w.sha256), "\n");
  return out;
}

// The command line that writes this target, for the file's first comment (its words quoted as a
// shell reads them; a word kiln cannot print faithfully leaves the command out).
std::string command_text(const IndexRequest& r) {
  std::vector<std::string> argv = {"kiln", "target", "init", "--torch", r.torch_version};
  if (r.write_index) argv.insert(argv.end(), {"--index-url", fetch::redact_url(r.torch_index)});
  if (!r.python_tags.empty()) argv.insert(argv.end(), {"--python-tags", join(r.python_tags, ",")});
  argv.insert(argv.end(), {"--archs", r.archs});
  if (!r.toolkit.empty()) argv.insert(argv.end(), {"--toolkit", r.toolkit});
  if (!r.name.empty()) argv.insert(argv.end(), {"--name", r.name});
  return shell_command(argv).value_or("kiln target init");
}

// Comment lines: text that strangers wrote in part (metadata, file names) reaches the file only
// through toml_comment, which ends each line where kiln ends it.
std::string comment_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += toml_comment(line);
  return out;
}

std::string render(const IndexRequest& r, const std::vector<TorchFile>& files,
                   const TorchFacts& facts, const ToolkitChoice& tk,
                   const manifest::ArchList& archs) {
  std::string std_note =
      facts.sysroot ? cat("; its cpp_extension compiles with -std=", facts.sysroot->cxx_std) : "";
  std::string head = comment_lines({cat("Written by `", command_text(r), "`."),
                                    cat("torch ", r.torch_version, " is a CUDA ", facts.cuda,
                                        " build (", facts.source, ")", std_note, "."),
                                    cat("Compiler: ", tk.note, tk.host_note, ".")});
  std::string description = cat("torch ", r.torch_version, " / CUDA ", facts.cuda, " / ", tk.note,
                                " / ", archs.canonical());
  return cat(head, "[target]\ndescription = ", toml_string(description),
             "\narchs = ", toml_string(archs.torch_arch_list()), "\n\n", python_table(r), "\n",
             torch_table(r, files), cuda_table(facts, tk), "\n[compiler]\ncxx = \"g++\"\n");
}

// The written text, parsed back, says exactly what was meant: the torch version and index, one
// wheel per chosen file with its sha256, the toolkit and its wheels, the archs. Anything a
// stranger's text might have slipped past the encoders (an extra table, another pin) differs.
Expected<void> check_written(const manifest::Target& parsed, const IndexRequest& r,
                             const std::vector<TorchFile>& files, const TorchFacts& facts,
                             const ToolkitChoice& tk, const manifest::ArchList& archs) {
  bool same = parsed.torch_version == r.torch_version &&
              parsed.torch_index_url == (r.write_index ? r.torch_index : "") &&
              parsed.torch_wheels.size() == files.size() && parsed.cuda_toolkit == tk.kind &&
              parsed.archs.canonical() == archs.canonical();
  for (std::size_t i = 0; same && i < files.size(); ++i) {
    const manifest::TorchWheel& w = parsed.torch_wheels[i];
    same = w.python_tag == files[i].python_tag && w.file == files[i].file.filename &&
           w.sha256 == files[i].file.sha256;
  }
  if (same && tk.cuda_table.empty()) {
    same = parsed.cuda_version == facts.cuda && parsed.cuda_wheels.size() == tk.wheels.size();
    for (std::size_t i = 0; same && i < tk.wheels.size(); ++i)
      same = parsed.cuda_wheels[i].file == tk.wheels[i].file &&
             parsed.cuda_wheels[i].sha256 == tk.wheels[i].sha256;
  }
  if (!same)
    return Error::failed(cat("the target written for torch ", r.torch_version, " from ",
                             fetch::redact_url(r.torch_index),
                             " does not read back as what was meant (the index's text changed "
                             "it); nothing was written"));
  return {};
}

// "2.11.0+cu128" is not there: the versions of the same release the index has.
Error missing_version(const IndexRequest& r, const std::vector<IndexFile>& page) {
  std::string base = r.torch_version.substr(0, r.torch_version.find('+'));
  std::vector<std::string> near;
  for (const IndexFile& f : page) {
    auto w = unbuilt_wheel(f.filename);
    if (w && w->distribution == "torch" && w->version.rfind(base, 0) == 0 &&
        std::find(near.begin(), near.end(), w->version) == near.end())
      near.push_back(w->version);
  }
  return Error::failed(cat("the index ", fetch::redact_url(r.torch_index), " has no torch ",
                           r.torch_version, " wheel for Linux x86_64 CPython",
                           near.empty() ? "" : cat(" (it has ", join(near, ", "), ")")));
}

std::string default_name(const IndexRequest& r, const TorchFacts& facts) {
  std::string cuda = facts.cuda;
  cuda.erase(std::remove(cuda.begin(), cuda.end(), '.'), cuda.end());
  return cat("torch", r.torch_version.substr(0, r.torch_version.find('+')), "-cu", cuda);
}

}  // namespace

Expected<IndexTarget> target_from_index(const IndexRequest& r, fetch::Downloader& downloader) {
  if (!manifest::is_torch_version(r.torch_version))
    return Error::bad_input(cat("bad --torch '", r.torch_version,
                                "': expected a version such as 2.15.0 or 2.11.0+cu128"));
  KILN_TRY(auto page, page_of(downloader, r.torch_index, "torch"));
  KILN_TRY(auto files, torch_files(page, r.torch_version, r.python_tags));
  if (files.empty()) return missing_version(r, page);
  KILN_TRY(TorchFacts facts, torch_facts(r, downloader, files));
  KILN_TRY(ToolkitChoice tk, choose_toolkit(r, downloader, facts));
  tk.host_note = host_compiler_note(tk);
  KILN_TRY(manifest::ArchList archs, requested_archs(r, facts));
  if (std::string problem = manifest::archs_toolkit_problem(archs, tk.release); !problem.empty())
    return Error::bad_input(cat(tk.note, " cannot build ", archs.canonical(), ": ", problem));
  std::string name = r.name.empty() ? default_name(r, facts) : r.name;
  IndexTarget out{name, render(r, files, facts, tk, archs), {}};
  auto parsed = manifest::parse_target(out.text, name, name + ".toml");
  if (!parsed)
    return Error::failed(cat("the target written for torch ", r.torch_version, " from ",
                             fetch::redact_url(r.torch_index), " does not parse (",
                             parsed.error().message, "); nothing was written"));
  KILN_CHECK(check_written(*parsed, r, files, facts, tk, archs));
  std::vector<std::string> tags;
  for (const auto& f : files) tags.push_back(f.python_tag);
  out.facts = {{"name", name},
               {"torch", r.torch_version},
               {"python_tags", tags},
               {"cuda", facts.cuda},
               {"cuda_source", facts.source},
               {"toolkit", manifest::toolkit_name(tk.kind)},
               {"toolkit_note", tk.note},
               {"archs", parsed->archs.canonical()}};
  return out;
}

Expected<std::vector<TorchFile>> torch_files(const std::vector<IndexFile>& page,
                                             const std::string& version,
                                             const std::vector<std::string>& tags) {
  std::vector<TorchFile> out;
  for (const IndexFile& f : page) {
    auto w = unbuilt_wheel(f.filename);
    if (!w || w->distribution != "torch" || w->version != version) continue;
    std::string py = join(w->python_tags, "."), abi = join(w->abi_tags, ".");
    if (!abi.starts_with(py) || !manifest::is_cpython_tag(abi) || !is_linux_x86_64(*w)) continue;
    if (!tags.empty() && std::find(tags.begin(), tags.end(), abi) == tags.end()) continue;
    if (std::any_of(out.begin(), out.end(),
                    [&](const TorchFile& t) { return t.python_tag == abi; }))
      continue;
    if (!is_sha256_hex(f.sha256))
      return Error::failed(cat("the index gives no sha256 for ", f.filename,
                               ": kiln pins every file by its sha256"));
    out.push_back({abi, f});
  }
  for (const std::string& tag : tags)
    if (std::none_of(out.begin(), out.end(),
                     [&](const TorchFile& t) { return t.python_tag == tag; }))
      return Error::failed(
          cat("the index has no torch ", version, " wheel for ", tag, " on Linux x86_64"));
  std::sort(out.begin(), out.end(), [](const TorchFile& a, const TorchFile& b) {
    return std::make_pair(a.python_tag.size(), a.python_tag) <
           std::make_pair(b.python_tag.size(), b.python_tag);
  });
  return out;
}

Expected<manifest::ArchList> archs_of_library(const fs::path& library) {
  KILN_TRY(archive::MappedFile file, archive::MappedFile::open(library));
  KILN_TRY(elf::ElfInfo info, elf::read_elf(file.bytes(), library.filename().string()));
  const elf::Section* section = info.section(".nv_fatbin");
  auto bytes = section ? elf::section_bytes(file.bytes(), *section) : std::nullopt;
  if (!bytes)
    return Error::failed(cat(library.string(), " holds no CUDA device code (.nv_fatbin)"));
  KILN_TRY(auto containers, fatbin::parse(*bytes, library.filename().string()));
  std::vector<std::string> tokens;
  for (const fatbin::Entry& e : fatbin::all_entries(containers)) {
    std::string suffix = e.variant ? std::string(1, e.variant) : "";
    if (e.kind == fatbin::Kind::Elf) tokens.push_back(cat("sm_", e.arch, suffix));
    if (e.kind == fatbin::Kind::Ptx) tokens.push_back(cat("compute_", e.arch, suffix));
  }
  std::sort(tokens.begin(), tokens.end());
  tokens.erase(std::unique(tokens.begin(), tokens.end()), tokens.end());
  auto archs = manifest::ArchList::parse(join(tokens, ";"));
  if (!archs) return Error::failed(cat(library.filename().string(), ": ", archs.error().message));
  return archs;
}

}  // namespace kiln::init
