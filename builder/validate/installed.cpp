// An installed distribution for the checks (`kiln doctor`): the dist-info directory's RECORD names
// the files, and the ELF files among them are read — each opened from the site directory one
// component at a time with O_NOFOLLOW, so no link is followed and nothing outside the site
// directory is read — with caps on RECORD, on the number and size of the files.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/limits.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace fs = std::filesystem;

namespace {

// RECORD, METADATA, kiln.json: the limit of a wheel's text files (docs/manifest.md, "Limits").
constexpr std::uint64_t kMaxTextBytes = manifest::kMaxWheelTextBytes;
constexpr std::size_t kMaxRecordRows = 200000;
constexpr std::size_t kMaxPathBytes = 4096;
constexpr std::uint64_t kMaxElfBytes = 2ull << 30;
constexpr std::uint64_t kMaxElfTotal = 8ull << 30;
constexpr std::size_t kMaxElfFiles = 512;

// A RECORD path kiln reads: relative, no empty, "." or ".." component, no control character.
bool safe_relative(std::string_view path) {
  if (path.empty() || path.size() > kMaxPathBytes || path.front() == '/') return false;
  for (char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return false;
  for (const auto& part : split(path, "/", /*skip_empty=*/false))
    if (part.empty() || part == "." || part == "..") return false;
  return true;
}

bool shared_object_name(std::string_view path) {
  std::string_view base = path.substr(path.rfind('/') + 1);
  return base.ends_with(".so") || base.find(".so.") != std::string_view::npos;
}

// "name-1.0.dist-info" -> name and version (the name's last '-' separates them).
Expected<packaging::WheelFileName> dist_info_name(const std::string& dist_info) {
  constexpr std::string_view kSuffix = ".dist-info";
  std::string_view stem(dist_info);
  if (!safe_relative(dist_info) || dist_info.find('/') != std::string::npos ||
      !stem.ends_with(kSuffix) || stem.size() == kSuffix.size())
    return Error::bad_input(cat(dist_info, ": not a dist-info directory name"));
  stem.remove_suffix(kSuffix.size());
  packaging::WheelFileName n;
  auto dash = stem.rfind('-');
  n.distribution = std::string(stem.substr(0, dash));
  if (dash != std::string_view::npos) n.version = std::string(stem.substr(dash + 1));
  return n;
}

// One ELF file named by RECORD: read, hashed against its row, parsed.
void load_elf(int site, const std::vector<std::string>& row, LoadedWheel& w, Findings& f,
              std::uint64_t& total) {
  const std::string& path = row[0];
  if (w.binaries.size() >= kMaxElfFiles) {
    f.warn(cat(path, ": not read (more than ", kMaxElfFiles, " shared objects)"));
    return;
  }
  auto data = read_beneath(site, path, std::min(kMaxElfBytes, kMaxElfTotal - total));
  if (!data) {
    f.fail(data.error().message);
    return;
  }
  total += data->size();
  if (data->size() < 4 || data->compare(0, 4,
                                        "\x7f"
                                        "ELF") != 0)
    return;
  Sha256 h;
  h.update(*data);
  auto digest = h.digest();
  std::string hash = cat("sha256=", base64_urlsafe_nopad(digest.data(), digest.size()));
  if (row.size() > 1 && !row[1].empty() && row[1] != hash)
    f.warn(cat(path, ": its bytes differ from RECORD's hash (changed after installation)"));
  auto info = elf::read_elf(*data, path);
  if (!info) {
    f.fail(cat(path, ": ", info.error().message));
    return;
  }
  Binary b;
  b.path = path;
  b.info = std::move(*info);
  b.data = std::move(*data);
  for (const auto& s : b.info.dynamic_symbols)
    if (s.defined && s.name.rfind("PyInit_", 0) == 0) b.extension = true;
  w.binaries.push_back(std::move(b));
}

// The dist-info texts, then the ELF files RECORD names; the "installed" check's findings.
CheckResult load_files(int site, LoadedWheel& w) {
  Findings f("installed");
  for (const char* name : {"METADATA", "RECORD", "kiln.json"}) {
    auto text = read_beneath(site, cat(w.dist_info, "/", name), kMaxTextBytes);
    if (text) w.texts[name] = std::move(*text);
  }
  if (!w.texts.count("RECORD")) {
    f.fail(cat(w.dist_info, "/RECORD is missing or unreadable: the installed files are unknown"));
    return f.finish("");
  }
  if (w.texts.count("kiln.json")) {
    auto p = wheel::parse_provenance(w.texts["kiln.json"]);
    if (p)
      w.provenance = std::move(*p);
    else
      w.provenance_error = p.error().message;
  }
  auto rows = parse_record(w.texts["RECORD"]);
  if (rows.size() > kMaxRecordRows) {
    f.warn(cat("RECORD has ", rows.size(), " rows; only the first ", kMaxRecordRows, " are read"));
    rows.resize(kMaxRecordRows);
  }
  std::size_t outside = 0;
  std::uint64_t total = 0;
  for (const auto& [line, row] : rows) {
    if (row.empty() || row[0].empty()) continue;
    if (!safe_relative(row[0])) {
      ++outside;  // scripts in ../../bin, or a path kiln does not follow
      continue;
    }
    w.members.push_back(Member{row[0], 0, row.size() > 1 ? row[1] : "", ""});
    if (shared_object_name(row[0])) load_elf(site, row, w, f, total);
  }
  f.data()["files"] = w.members.size();
  f.data()["elf_files"] = w.binaries.size();
  f.data()["outside"] = outside;
  return f.finish(cat(w.members.size(), " files in RECORD, ", w.binaries.size(),
                      " ELF file(s) read",
                      outside ? cat(" (", outside, " outside, not read)") : ""));
}

}  // namespace

Expected<Report> validate_installed(const fs::path& site, const std::string& dist_info,
                                    const Options& options,
                                    const std::vector<manifest::Arch>& gpus) {
  LoadedWheel w;
  KILN_TRY(w.name, dist_info_name(dist_info));
  w.installed = true;
  w.dist_info = dist_info;
  w.path = site / dist_info;
  w.filename = dist_info;
  UniqueFd dir(::open(site.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() < 0)
    return Error::bad_input(cat(site.string(), ": not a directory (", std::strerror(errno), ")"));
  struct stat st {};
  if (::fstatat(dir.get(), dist_info.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      !S_ISDIR(st.st_mode))
    return Error::bad_input(cat((site / dist_info).string(), ": no such dist-info directory"));

  Report r;
  r.wheel = w.path;
  r.checks.push_back(load_files(dir.get(), w));
  r.checks.push_back(check_torch_abi(w, options));
  Options per_gpu = options;
  per_gpu.gpu.reset();
  if (gpus.empty()) {
    for (auto& c : check_gpu_code(w, per_gpu)) r.checks.push_back(std::move(c));
    return r;
  }
  std::vector<CheckResult> once;  // gpu-code's ptx-jit, after every GPU's gpu-target
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    per_gpu.gpu = gpus[i];
    for (auto& c : check_gpu_code(w, per_gpu)) {
      if (c.id == "gpu-code" && i == 0)
        r.checks.push_back(std::move(c));
      else if (c.id == "gpu-target")
        r.checks.push_back(std::move(c));
      else if (i == 0)
        once.push_back(std::move(c));
    }
  }
  for (auto& c : once) r.checks.push_back(std::move(c));
  return r;
}

}  // namespace kiln::validate
