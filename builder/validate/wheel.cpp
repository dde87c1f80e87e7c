// Loading a wheel for the checks, wheel file names, and the Findings helper.
#include <algorithm>
#include <set>

#include "core/hash.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "manifest/limits.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace fs = std::filesystem;

std::string verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Pass:
      return "pass";
    case Verdict::Warn:
      return "warn";
    case Verdict::Skip:
      return "skip";
    default:
      return "fail";
  }
}

bool Report::ok() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const CheckResult& c) { return c.verdict == Verdict::Fail; });
}

const CheckResult* Report::find(const std::string& id) const {
  for (const auto& c : checks)
    if (c.id == id) return &c;
  return nullptr;
}

namespace {

// A finding quotes the wheel's bytes at times (a field's value): a line of at most this many bytes
// (cut at a character's start, its whole size said), in every report (text, --json, JUnit).
constexpr std::size_t kMaxFindingBytes = 1024;

std::string bounded(std::string line) {
  if (line.size() <= kMaxFindingBytes) return line;
  return cat(terminal_field(line, kMaxFindingBytes), " (", line.size(), " bytes)");
}

}  // namespace

void Findings::note(std::string line) {
  result_.details.push_back(bounded(std::move(line)));
}

void Findings::add(Verdict v, std::string line) {
  line = bounded(std::move(line));
  if (v == Verdict::Fail) {
    verdict_ = Verdict::Fail;
    fails_.push_back(line);
  } else if (v == Verdict::Warn) {
    if (verdict_ != Verdict::Fail) verdict_ = Verdict::Warn;
    warns_.push_back(line);
  }
  result_.details.push_back(cat(verdict_name(v), ": ", line));
}

CheckResult Findings::finish(const std::string& ok_message) {
  result_.verdict = verdict_;
  const auto& lead = !fails_.empty() ? fails_ : warns_;
  if (lead.empty()) {
    result_.message = ok_message;
  } else {
    std::size_t others = fails_.size() + warns_.size() - 1;
    result_.message = others ? cat(lead.front(), " (and ", others, " more)") : lead.front();
  }
  return std::move(result_);
}

bool is_kiln_wheel(const LoadedWheel& w) {
  return w.texts.count("kiln.json") > 0;
}

void policy(const LoadedWheel& w, Findings& f, const std::string& line) {
  if (is_kiln_wheel(w))
    f.fail(line);
  else
    f.warn(cat(line, " (kiln's rule for its own wheels: a warning for others)"));
}

CheckResult skipped(std::string id, std::string why) {
  CheckResult r;
  r.id = std::move(id);
  r.verdict = Verdict::Skip;
  r.message = std::move(why);
  return r;
}

namespace {

Expected<void> check_wheel_path(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Error::bad_input(cat(path.string(), ": no such file"));
  if (!fs::is_regular_file(path, ec))
    return Error::bad_input(cat(path.string(), ": not a regular file"));
  return {};
}

// Top-level "*.dist-info" directories named by the entries.
std::set<std::string> dist_info_dirs(const archive::ZipReader& zip) {
  std::set<std::string> out;
  for (const auto& e : zip.entries()) {
    auto slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    std::string top = e.name.substr(0, slash);
    if (top.size() > 10 && top.substr(top.size() - 10) == ".dist-info") out.insert(top);
  }
  return out;
}

// kiln.json's text into `provenance`, or why it does not read into `error`.
void read_provenance(std::string_view text, std::optional<wheel::Provenance>& provenance,
                     std::string& error) {
  auto p = wheel::parse_provenance(text);
  provenance.reset();
  error.clear();
  if (p)
    provenance = std::move(*p);
  else
    error = p.error().message;
}

}  // namespace

namespace {

// The rest of loading, once the zip is opened (or failed to open).
Expected<LoadedWheel> load_opened(LoadedWheel w, Expected<archive::ZipReader> zip);

}  // namespace

Expected<LoadedWheel> load_wheel(const fs::path& path) {
  KILN_CHECK(check_wheel_path(path));
  LoadedWheel w;
  w.path = path;
  w.filename = path.filename().string();
  KILN_TRY(w.name, packaging::parse_wheel_file_name(w.filename));
  return load_opened(std::move(w), archive::ZipReader::open(path));
}

Expected<LoadedWheel> load_wheel_image(std::string image, const std::string& filename) {
  LoadedWheel w;
  w.path = filename;
  w.filename = filename;
  KILN_TRY(w.name, packaging::parse_wheel_file_name(w.filename));
  return load_opened(std::move(w), archive::ZipReader::from_bytes(std::move(image), filename));
}

namespace {

Expected<LoadedWheel> load_opened(LoadedWheel w, Expected<archive::ZipReader> zip) {
  if (!zip) {
    if (zip.error().kind != ErrorKind::BadInput) return std::move(zip).error();
    w.zip_error = zip.error().message;
    return w;
  }
  w.zip.emplace(std::move(*zip));

  auto dirs = dist_info_dirs(*w.zip);
  std::string wanted = cat(w.name.distribution, "-", w.name.version, ".dist-info");
  for (const auto& d : dirs)
    if (d == wanted || w.dist_info.empty()) w.dist_info = d;
  if (dirs.size() > 1 && !dirs.count(wanted))
    w.dist_info.clear();  // ambiguous: the archive check says so
  std::uint64_t python_bytes = 0;
  std::set<std::string> text_names;
  for (const char* f : {"METADATA", "WHEEL", "RECORD", "kiln.json"})
    text_names.insert(cat(w.dist_info, "/", f));

  for (const auto& e : w.zip->entries()) {
    if (e.is_directory()) continue;
    Member m;
    m.name = e.name;
    bool keep_text = !w.dist_info.empty() && text_names.count(e.name);
    bool keep_python = e.name.ends_with(".py");
    if (keep_python && (e.size > kMaxPythonFileBytes || python_bytes + e.size > kMaxPythonBytes)) {
      keep_python = false;
      w.python_skipped.push_back(e.name);
    }
    if (keep_python) {
      python_bytes += e.size;
      keep_text = true;
    }
    bool maybe_elf = true;
    std::string kept;
    Sha256 h;
    // A dist-info text file is held whole: it may not inflate past the limit (a Python file
    // larger than its own limit is not kept, above).
    bool capped = keep_text && !keep_python;
    auto sink = [&](std::string_view chunk) {
      h.update(chunk);
      m.size += chunk.size();
      if (keep_text || maybe_elf) {
        kept += chunk;
        if (maybe_elf && kept.size() >= 4 &&
            kept.compare(0, 4,
                         "\x7f"
                         "ELF") != 0) {
          maybe_elf = false;
          if (!keep_text) std::string().swap(kept);
        }
      }
    };
    auto read = capped ? w.zip->read_chunks(e, sink, manifest::kMaxWheelTextBytes,
                                            manifest::kWheelTextLimit)
                       : w.zip->read_chunks(e, sink);
    if (!read) {
      m.error = read.error().message;
      w.members.push_back(std::move(m));
      continue;
    }
    auto digest = h.digest();
    m.record_hash = cat("sha256=", base64_urlsafe_nopad(digest.data(), digest.size()));
    w.members.push_back(std::move(m));
    if (keep_python)
      w.python_files[e.name] = kept;
    else if (keep_text)
      w.texts[e.name.substr(w.dist_info.size() + 1)] = kept;
    if (maybe_elf && kept.size() >= 4) {
      auto info = elf::read_elf(kept, e.name);
      if (!info) {
        w.elf_errors.push_back(info.error().message);
        continue;
      }
      Binary b;
      b.path = e.name;
      b.info = std::move(*info);
      b.data = std::move(kept);
      for (const auto& s : b.info.dynamic_symbols)
        if (s.defined && s.name.rfind("PyInit_", 0) == 0) b.extension = true;
      w.binaries.push_back(std::move(b));
    }
  }
  if (w.texts.count("kiln.json"))
    read_provenance(w.texts["kiln.json"], w.provenance, w.provenance_error);
  return w;
}

}  // namespace

Expected<WheelSummary> summarize(const fs::path& path) {
  KILN_CHECK(check_wheel_path(path));
  WheelSummary s;
  KILN_TRY(s.name, packaging::parse_wheel_file_name(path.filename().string()));
  auto zip = archive::ZipReader::open(path);
  if (!zip) {
    if (zip.error().kind != ErrorKind::BadInput) return std::move(zip).error();
    return s;
  }
  for (const auto& d : dist_info_dirs(*zip)) {
    const archive::ZipEntry* e = zip->find(d + "/kiln.json");
    if (!e) continue;
    auto text = zip->read(*e, manifest::kMaxWheelTextBytes, manifest::kWheelTextLimit);
    if (!text) continue;
    read_provenance(*text, s.provenance, s.provenance_error);
  }
  return s;
}

Expected<std::vector<fs::path>> find_wheels(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return Error::bad_input(cat(path.string(), ": no such file or directory"));
  if (!fs::is_directory(path, ec)) return std::vector<fs::path>{path};
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(
           path, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".whl") out.push_back(it->path());
  }
  if (ec) return Error::failed(cat("cannot list ", path.string(), ": ", ec.message()));
  std::sort(out.begin(), out.end());
  if (out.empty()) return Error::bad_input(cat(path.string(), ": no .whl files in this directory"));
  return out;
}

}  // namespace kiln::validate
