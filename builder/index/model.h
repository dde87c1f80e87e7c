// The index model: per target, the projects and wheels of the cache, with their core metadata and
// the pre-rendered PEP 503 HTML and PEP 691 JSON pages.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "packaging/wheel_name.h"

namespace kiln::index {

// The target of a wheel served on every target's index (kiln's own, <cache>/kiln-wheels/).
inline constexpr std::string_view kEveryTarget = "*";

// What one cache entry offers the index (read from entry.json and the wheel).
struct WheelEntry {
  std::string target;    // the sub-index it belongs to; kEveryTarget: all of them
  std::string key;       // build key: the entry directory's name
  std::string filename;  // the wheel's file name
  std::string sha256;
  std::uint64_t size = 0;
  std::int64_t committed_at = 0;  // unix seconds
  std::filesystem::path dir;      // the entry directory; the wheel is dir / filename
  std::string metadata;           // the wheel's .dist-info/METADATA bytes
  std::string archs;  // entry.json's archs ("sm_90;sm_120+ptx"); "" for pure and kiln's wheels
  std::string attestation;  // the entry's signed attestation (cache::attestation_file_name), or ""

  bool last = false;  // its package's last build for the target committed or hit this entry
};

// A wheel file name as packaging reads it (packaging/wheel_name.h), with the index's rules on
// top: at most 255 bytes, the name starting with a letter or digit, and nothing but ASCII letters,
// digits and "._+!" between the dashes (what a URL path and any file system carry as written).
Expected<packaging::WheelFileName> index_wheel_name(std::string_view filename);

// A page in both formats of the negotiation, each with its strong ETag.
struct Page {
  std::string html, html_etag;
  std::string json, json_etag;
};

struct File {
  std::string filename;
  std::string version;
  std::string sha256;
  std::uint64_t size = 0;
  std::int64_t committed_at = 0;
  std::string key;
  std::filesystem::path dir;  // entry directory in the cache
  std::string requires_python;
  std::string metadata;
  std::string metadata_sha256;
  std::string archs;  // the entry's archs ("sm_90;sm_120+ptx"); "" for pure wheels
  // The signed attestation, served at <filename>.intoto.jsonl beside the wheel, or "".
  std::string attestation;
  std::string attestation_sha256;
};

struct Project {
  std::string name;                   // normalised
  std::vector<File> files;            // sorted by file name
  std::vector<std::string> versions;  // ascending (PEP 440 order for the public part)
  Page page;
  const File* find(std::string_view filename) const;
};

struct Target {
  std::string name;
  std::map<std::string, Project, std::less<>> projects;  // by normalised name
  Page page;                                             // the project list, /<target>/simple/
};

struct IndexModel {
  std::map<std::string, Target, std::less<>> targets;
  Target everywhere;  // the projects every target has (kEveryTarget's), in each of `targets` too
  std::string root_html, root_etag;  // "/": the list of targets
  std::vector<std::string> skipped;  // one line per entry left out, and why

  const Target* target(std::string_view name) const;
  // A target kiln knows (of the manifests directory) that has no wheels of its own yet: the
  // projects every target has.
  Target known_target(std::string_view name) const;
};

// What a target of the manifests directory declares, for the list of targets at "/" (JSON): what
// a host must match to install its wheels, and whether `kiln build --target NAME` builds it there.
struct TargetFacts {
  std::string torch;                // "2.11.0" ([torch] version); "" when not pinned
  std::string cuda;                 // "13.0"
  std::vector<std::string> python;  // the CPython tags it has a torch for ("cp311", "cp313t")
  std::vector<std::string> archs;   // canonical tokens: "sm_90", "sm_120+ptx", "compute_120"
};

// "/" as JSON (PEP 691's media type, kiln's own fields): every target of the model and of
// `declared`, each with its index path (relative to "/"), what a host must match (torch, CUDA,
// Python tags, archs: `declared`'s, else what the target's compiled wheels say: the local label's
// torch major.minor and CUDA, their ABI tags, the archs every one of them holds), whether it is
// declared (buildable), and its projects with their versions, ABI tags and archs.
std::string targets_json(const IndexModel& model,
                         const std::map<std::string, TargetFacts, std::less<>>& declared);

// The model of these entries. Within one target, one wheel per (project, version, tags): the
// entry marked `last` (its package's last build for the target), else the newest committed_at
// (ties: the greater build key). Entries with an unusable target name,
// file name, hash or metadata are left out and named in `skipped`.
IndexModel build_model(std::vector<WheelEntry> entries);

// A project without files (a page kiln answers for a name of its own) and a target without
// projects.
Project empty_project(std::string_view normalized_name);
Target empty_target(std::string_view name);

// Target names that can be one URL path segment and one directory name.
bool is_valid_target_name(std::string_view name);

// Every byte outside RFC 3986's unreserved set as %XX: "a+b" -> "a%2Bb".
std::string percent_encode(std::string_view text);

}  // namespace kiln::index
