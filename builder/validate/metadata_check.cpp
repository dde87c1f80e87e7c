// Check "metadata": METADATA is core metadata by the standard's rules (metadata_fields.cpp, the
// rules packaging applies); its header lines parse; its name and version agree with the file name
// and the dist-info directory; each License-File is in the wheel; kiln.json, when there is one,
// reads. kiln's rules on top (a failure for its own wheels, a warning for others): Requires-Python
// present, the version canonical and its local label normalised, Project-URL "Label, URL"; for
// kiln's compiled wheels, the torch pin and local label agree with the provenance.
#include <algorithm>

#include "core/strings.h"
#include "manifest/limits.h"
#include "manifest/requirement.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "validate/checks.h"
#include "validate/metadata_standard.h"
#include "wheel/metadata.h"
#include "wheel/tags.h"
#include "wheel/upstream.h"

namespace kiln::validate {

namespace {

// The header lines up to the first empty line must each be "Name: value" or a continuation.
std::string header_problem(std::string_view text) {
  std::size_t line_no = 0, pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;
    if ((line[0] == ' ' || line[0] == '\t') && line_no > 1) continue;
    if (!is_metadata_header_line(line))
      return cat("line ", line_no, " is not a 'Name: value' header: ", line.substr(0, 60));
  }
  return "";
}

using manifest::kMaxNameBytes;
using manifest::kMaxRequirementBytes;

std::string torch_minor_of(const std::string& version) {
  auto parts = split(version.substr(0, version.find('+')), ".");
  return parts.size() >= 2 ? cat(parts[0], ".", parts[1]) : "";
}

}  // namespace

bool is_metadata_header_line(std::string_view line) {
  // [A-Za-z0-9][A-Za-z0-9-]*:, then nothing or " " and a value without a line break.
  Scanner s(line);
  if (!is_ascii_alnum(s.peek())) return false;
  s.take_while([](char c) { return is_ascii_alnum(c) || c == '-'; });
  if (!s.skip(':')) return false;
  return s.done() || (s.skip(' ') && s.rest().find_first_of("\r\n") == std::string_view::npos);
}

bool is_normalized_local_label(std::string_view label) {
  for (const auto& part : split(label, ".", /*skip_empty=*/false))
    if (part.empty() || !std::all_of(part.begin(), part.end(),
                                     [](char c) { return is_ascii_lower(c) || is_ascii_digit(c); }))
      return false;
  return true;
}

bool same_version_as_file_name(std::string_view metadata_version,
                               const packaging::WheelFileName& name) {
  auto v = packaging::Version::parse(metadata_version);
  return v && *v == name.parsed_version;
}

namespace {

// Name: the project the file name and the dist-info directory name (both compared normalised, as
// installers do). A missing, invalid or overlong name is the standard's problem.
void check_name(const LoadedWheel& w, const std::string& name, Findings& f) {
  if (!packaging::is_valid_project_name(name) || name.size() > kMaxNameBytes) return;
  if (packaging::file_name_part(name) != packaging::file_name_part(w.name.distribution))
    f.fail(cat("METADATA Name '", name, "' does not match the file name's '", w.name.distribution,
               "'"));
  if (!w.dist_info.empty()) {
    std::string stem = w.dist_info.substr(0, w.dist_info.size() - std::string(".dist-info").size());
    std::string dir_name = stem.substr(0, stem.rfind('-'));
    if (packaging::file_name_part(name) != packaging::file_name_part(dir_name))
      f.fail(cat("METADATA Name '", name, "' does not match the directory ", w.dist_info));
  }
}

// The dist-info directory's version: PEP 440-equal to METADATA's (one that is no version is less
// than every version), spelled as METADATA or the file name spells it (kiln's rule).
void check_directory_version(const LoadedWheel& w, const std::string& version,
                             const std::string& escaped, Findings& f) {
  if (w.dist_info.empty()) return;
  std::string stem = w.dist_info.substr(0, w.dist_info.size() - std::string(".dist-info").size());
  std::string dir_version = stem.substr(stem.rfind('-') + 1);
  if (packaging::compare_versions(dir_version, version) != 0)
    f.fail(cat("METADATA Version ", version, " does not match the directory ", w.dist_info));
  else if (dir_version != escaped && dir_version != version)
    policy(w, f,
           cat("METADATA Version ", version, " is spelled ", dir_version, " in ", w.dist_info));
}

// Version: the file name's and the directory's, equal as PEP 440 compares them (as installers do);
// spelled the same, canonical PEP 440 with a normalised local label (kiln's rules). Returns that
// label ("" when there is none).
std::string check_version(const LoadedWheel& w, const std::string& version, Findings& f) {
  if (!packaging::is_version(version)) return "";  // the standard's problem
  std::string escaped = version;
  std::replace(escaped.begin(), escaped.end(), '-', '_');
  if (!same_version_as_file_name(version, w.name))
    f.fail(cat("METADATA Version ", version, " does not match the file name's ", w.name.version));
  else if (escaped != w.name.version)
    policy(w, f,
           cat("METADATA Version ", version, " is spelled ", w.name.version, " in the file name"));
  check_directory_version(w, version, escaped, f);
  auto plus = version.find('+');
  std::string pub = version.substr(0, plus);
  std::string local;
  if (plus != std::string::npos) local = version.substr(plus + 1);
  if (!packaging::is_canonical_version(pub))
    policy(w, f, cat("METADATA Version ", version, " is not spelled as PEP 440 normalises it"));
  if (plus != std::string::npos && !is_normalized_local_label(local))
    policy(w, f,
           cat("local version label '", local,
               "' is not normalised (lowercase letters, digits and dots)"));
  return local;
}

// The requirement on torch without a marker, the pin kiln writes ("" when there is none); the
// standard's check says what is wrong with the others.
std::string torch_pin_of(const wheel::ParsedMetadata& md) {
  for (const auto& req : md.all("Requires-Dist"))
    if (req.size() <= kMaxRequirementBytes && manifest::is_valid_requirement(req) &&
        manifest::requirement_name(req) == "torch" && req.find(';') == std::string::npos)
      return req;
  return "";
}

// Each License-File is a file under .dist-info/licenses/ (PEP 639); Project-URL is "Label, URL".
void check_files_and_urls(const LoadedWheel& w, const wheel::ParsedMetadata& md, Findings& f) {
  for (const auto& path : md.all("License-File")) {
    std::string want = cat(w.dist_info, "/licenses/", path);
    bool present = std::any_of(w.members.begin(), w.members.end(),
                               [&](const Member& m) { return m.name == want; });
    if (!present && !w.dist_info.empty() && path.find("..") == std::string::npos)
      f.fail(cat("METADATA License-File '", printable_excerpt(path),
                 "' names no file of the wheel (", printable_excerpt(want), ")"));
  }
  for (const auto& u : md.all("Project-URL")) {
    auto comma = u.find(',');
    if (comma == std::string::npos || trim(u.substr(comma + 1)).empty())
      policy(w, f, cat("METADATA Project-URL '", printable_excerpt(u), "' is not 'Label, URL'"));
  }
}

// kiln's compiled wheels: the pin and the local label say which torch and CUDA built them, so
// they must name the ones kiln.json records.
void check_built_torch(const wheel::Provenance& p, const std::string& built_torch,
                       const std::string& torch_pin, const std::string& version,
                       const std::string& local, Findings& f) {
  std::string want = cat("torch==", torch_minor_of(built_torch), ".*");
  std::string compact = torch_pin;
  compact.erase(std::remove(compact.begin(), compact.end(), ' '), compact.end());
  if (torch_pin.empty())
    f.fail(cat("no Requires-Dist on torch, but the wheel was built against torch ", built_torch,
               " (want ", want, ")"));
  else if (compact != want)
    f.fail(cat("Requires-Dist '", torch_pin, "' does not pin the torch it was built against (",
               built_torch, "; want ", want, ")"));
  std::string cuda = p.tools ? p.tools->torch.cuda : "";
  if (p.facts.target_cuda) cuda = *p.facts.target_cuda;
  if (!cuda.empty() && !version.empty()) {
    std::string label = wheel::local_label(cuda, built_torch);
    if (local != label)
      f.fail(cat("local version label '", local,
                 "' does not name the build's CUDA and torch (want '", label, "')"));
  }
}

// Other wheels: an ELF file that links torch while METADATA pins no torch installs beside any
// torch, whose ABI it may not match.
void warn_unpinned_torch(const LoadedWheel& w, Findings& f) {
  std::string linker;
  for (const auto& b : w.binaries)
    for (const auto& n : b.info.needed)
      if (linker.empty() && (n == "libc10.so" || n == "libtorch.so" || n == "libtorch_cpu.so"))
        linker = cat(b.path, " links torch (", n, ")");
  if (!linker.empty()) f.warn(cat(linker, " but METADATA does not pin torch"));
}

// The wheel's requirements, extras and classifiers against its sdist's: only kiln's additions
// (the manifest's extra-dependencies, the torch pin) may differ.
void compare_upstream(const LoadedWheel& w, const wheel::ParsedMetadata& md,
                      const std::string& torch_pin, const Options& options, Findings& f) {
  if (!options.upstream) {
    if (!options.upstream_note.empty())
      f.data()["upstream"] = cat("not compared: ", options.upstream_note);
    return;
  }
  std::vector<std::string> added;
  if (w.provenance && w.provenance->facts.extra_dependencies)
    added = *w.provenance->facts.extra_dependencies;
  auto differences = wheel::upstream_differences(md, *options.upstream, added, torch_pin);
  for (const auto& d : differences) f.fail(cat("METADATA differs from the sdist's: ", d));
  f.data()["upstream"] = differences.empty() ? "same as the sdist's" : "differs from the sdist's";
}

}  // namespace

CheckResult check_metadata(const LoadedWheel& w, const Options& options) {
  if (!w.zip) return skipped("metadata", "the archive is unreadable");
  auto it = w.texts.find("METADATA");
  if (it == w.texts.end()) {
    Findings f("metadata");
    const std::string name = cat(w.dist_info, "/METADATA");
    f.fail(w.dist_info.empty() ? "no .dist-info directory, so no METADATA"
           : w.zip->find(name) ? cat(name, " is unreadable (the archive check says why)")
                               : cat(name, " is missing"));
    return f.finish("");
  }
  Findings f("metadata");
  const std::string& text = it->second;
  for (const auto& problem : standard_metadata_problems(text)) f.fail(cat("METADATA ", problem));
  if (!is_valid_utf8(text)) return f.finish("");
  if (auto problem = header_problem(text); !problem.empty()) f.fail(cat("METADATA ", problem));
  wheel::ParsedMetadata md = wheel::parse_metadata(text);
  std::string mv = md.first("Metadata-Version"), name = md.first("Name"),
              version = md.first("Version");
  f.data()["name"] = name;
  f.data()["version"] = version;
  f.data()["metadata_version"] = mv;
  check_name(w, name, f);
  std::string local = check_version(w, version, f);
  check_files_and_urls(w, md, f);
  std::string rp = md.first("Requires-Python");
  if (rp.empty()) policy(w, f, "METADATA has no Requires-Python");

  std::string torch_pin = torch_pin_of(md);
  f.data()["requires_torch"] = torch_pin;
  if (!w.provenance_error.empty()) f.fail(w.provenance_error);
  std::string built_torch;
  if (w.provenance && w.provenance->tools) built_torch = w.provenance->tools->torch.version;
  if (!built_torch.empty())
    check_built_torch(*w.provenance, built_torch, torch_pin, version, local, f);
  else if (torch_pin.empty())
    warn_unpinned_torch(w, f);
  compare_upstream(w, md, torch_pin, options, f);
  return f.finish(cat(name, " ", version, ": core metadata ", mv, ", Requires-Python ", rp,
                      torch_pin.empty() ? std::string() : cat(", ", torch_pin)));
}

}  // namespace kiln::validate
