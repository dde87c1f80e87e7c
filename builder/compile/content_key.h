// Content keys: a compile job's object is keyed by what the job read, not by where it read it
// from (ccache's direct mode). A job has a command key: the sha256 of its exact commands and the
// tools' identities (nvcc's and the host compiler's versions), which for the same sources in the
// same build root are the same whatever torch or Python the target pins, since those are reached
// through fixed paths. Under its command key the cache keeps a manifest: the dependency sets
// earlier runs of the job read (the source and every header, from the compiler's -MD output),
// each file with its sha256. A job whose recorded set matches the files now (every file still
// there with the same sha256) has a content key, the sha256 of its command key and that set:
// its object is looked up under it. A changed header always misses; a target whose torch
// headers a unit includes are unchanged shares the unit's objects with the others.
//
// What the manifest cannot see, like ccache's direct mode: a header that appears where an
// earlier run found none (a new file earlier on the include path, `__has_include`). The tools'
// own headers are covered by their identity in the command key.
//
// Manifests may come from a shared cache: each is bounded (candidates, files, path length), and
// the files it names are only hashed, never trusted: a path that is not a regular file under the
// size cap makes its candidate a mismatch.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compile/object_cache.h"
#include "core/expected.h"

namespace kiln::compile {

// Every file a job read, each with its sha256, sorted by path.
using Deps = std::vector<std::pair<std::string, std::string>>;

// The prerequisites of a Makefile dependency file (`gcc -MD -MF`): every path after the first
// rule's colon, line continuations joined, `\ ` and `$$` unescaped, later rules' targets skipped.
Expected<std::vector<std::string>> parse_depfile(std::string_view text);

// The sha256 of regular files, each read once per build (a build's headers are shared by its
// jobs). Relative paths are resolved against `cwd`, the jobs' directory.
class FileHasher {
 public:
  explicit FileHasher(std::filesystem::path cwd) : cwd_(std::move(cwd)) {}
  // nullopt when `path` is not a readable regular file of at most kMaxFileBytes.
  std::optional<std::string> sha256(const std::string& path);
  static constexpr std::size_t kMaxFileBytes = std::size_t{64} << 20;

 private:
  std::filesystem::path cwd_;
  std::map<std::string, std::optional<std::string>> known_;
};

// A manifest: the dependency sets recorded under a command key, newest first.
std::string render_manifest(const std::vector<Deps>& candidates);
// nullopt for anything but a manifest within the limits below.
std::optional<std::vector<Deps>> parse_manifest(std::string_view text);
inline constexpr std::size_t kMaxCandidates = 16;
inline constexpr std::size_t kMaxDepFiles = 65536;

// A job's key when its dependencies are `deps`.
std::string content_key(const std::string& command_key, const Deps& deps);

struct Keyed {
  std::string key;  // the content key
  Deps deps;
};

// Looks up and records jobs' dependency sets in an object cache's manifests. Outlives the plan:
// the jobs' on_success record what they read through it.
class ContentKeys {
 public:
  ContentKeys(ObjectCache& cache, std::filesystem::path cwd) : cache_(cache), hasher_(cwd) {}
  // The content key of the job with `command_key` when one of its recorded dependency sets
  // matches the files now; nullopt when none does (the job must run). `label` names the job in
  // the verbose log's reason for a miss ("": no log).
  std::optional<Keyed> lookup(const std::string& command_key, const std::string& label);
  // lookup as the planner asks: the local manifest read only (ObjectCache::peek_manifest).
  std::optional<Keyed> probe(const std::string& command_key, const std::string& label);
  // After the job ran: the files its dependency files name plus `extra` (files another job read
  // for it), hashed now, recorded under `command_key` (newest first, at most kMaxCandidates).
  Expected<Keyed> record(const std::string& command_key,
                         const std::vector<std::filesystem::path>& depfiles,
                         const Deps& extra = {});
  // The files a dependency file names, hashed now.
  Expected<Deps> read(const std::filesystem::path& depfile);

 private:
  // The dependency sets recorded locally under `command_key` (`peek`: read only).
  std::vector<Deps> candidates(const std::string& command_key, bool peek = false);
  std::optional<Keyed> find(const std::string& command_key, const std::string& label, bool peek);
  // The remote's sets (read once per command key): other workers' dependency sets.
  const std::vector<Deps>& shared_candidates(const std::string& command_key);
  std::optional<Keyed> match(const std::string& command_key, const std::vector<Deps>& sets,
                             std::string& why);

  ObjectCache& cache_;
  FileHasher hasher_;
  std::map<std::string, std::vector<Deps>> shared_;  // by command key
};

// Two dependency sets as one (sorted, each path once).
Deps merge_deps(const Deps& a, const Deps& b);

}  // namespace kiln::compile
