// The cache's layout, owned here: every path inside a cache is made, and every cache entry is read,
// through Store. The content-addressed wheel store, <cache>/wheels/<build key>/{<wheel>,
// entry.json}, whose entries appear whole (staged in <cache>/tmp, renamed into place) and are
// locked per key (<cache>/locks/<key>.lock) so two concurrent builds of one key build it once; the
// object cache, <cache>/objects/<key[0:2]>/<key><suffix>; the last build's key inputs per package,
// <cache>/last/<target>/<package>.json; and the other folders.
#pragma once

#include <cstdint>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/entry.h"
#include "cache/made.h"
#include "cache/remote.h"
#include "cache/slots.h"
#include "core/expected.h"
#include "core/fs.h"
#include "core/lock.h"

namespace kiln::cache {

struct Entry {
  std::string key;
  std::filesystem::path dir;
  std::filesystem::path wheel;  // absolute path of the wheel file
  std::string sha256;
  std::uint64_t size = 0;
  EntryInfo info;  // entry.json, as parse_entry_info read it
  // The signed attestation beside the wheel (absolute), empty when the entry has none.
  std::filesystem::path attestation;
};

// The per-key build lock.
using Lock = FileLock;

// A staging directory under <cache>/tmp, locked by its process while it lives, so that `gc` removes
// only the staging directories of processes that are gone. Removed with its contents when
// destroyed, unless released.
struct Staging {
  FileLock lock;
  TempDir dir;  // (declared after the lock: removed before the lock is let go)
  const std::filesystem::path& path() const { return dir.path(); }
};

// What Store::read_entry found at <cache>/wheels/<key>.
struct EntryRead {
  enum class State {
    Usable,      // `entry` holds it
    Missing,     // no entry directory (never committed, or removed meanwhile)
    Incomplete,  // a directory without entry.json (or one that cannot be read): nothing to use
    Unusable,    // the entry is there but cannot be used: `reason` says why
  };
  State state = State::Missing;
  Entry entry;
  std::string reason;  // one line, without the key
  explicit operator bool() const { return state == State::Usable; }
};

// What <cache>/last/<target>/<package>.json records: the key inputs of the package's last build
// for that target (--explain diffs against them) and which entry that build committed or hit (the
// index serves that entry's wheel under its file name). A build with a --backend override records
// nothing. A record from an older kiln holds the inputs alone: `key` and `wheel` are empty.
struct LastBuild {
  std::string target;   // the directory's name
  std::string package;  // the file's name without ".json" (the normalised package name)
  std::string key;      // 64 hex digits, or "" when not recorded
  std::string wheel;    // the entry's wheel file name, or ""
  std::string backend;
  nlohmann::json inputs;  // an object, or null
};

struct VerifyProblem {
  std::string key;  // a build key, or for an object "objects/<key[0:2]>/<file>"
  std::string message;
};

// What Store::verify_objects found in the object cache.
struct ObjectsVerified {
  std::size_t checked = 0;
  // Damaged: bytes that no longer hash to the sha256 their header records, or a file that is no
  // entry (not a regular file, not named <sha256><suffix>).
  std::vector<VerifyProblem> damaged;
  // Entries without a kiln-object header ("objects/<key[0:2]>/<file>"): written by a kiln from
  // before entries had one (or truncated into it); never used, and removed by gc.
  std::vector<std::string> stale;
};

// What `kiln cache gc --max-age/--max-size` evicts (Store::evict): wheel entries
// (<cache>/wheels/<key>) and object cache entries (every file object_files() lists), by when a
// build last used them: the mtime of the entry's entry.json (of the entry directory when it has
// none) or of the object file, which a build's hit sets to now (lookup_verified, load_object).
struct EvictPolicy {
  std::optional<std::int64_t> max_age;     // seconds: what was last used longer ago goes
  std::optional<std::uint64_t> max_bytes;  // then least recently used first until at most this
};

// What gc removed: entries (a file, a directory, a link each) and their apparent bytes; of them,
// the build roots that killed builds left.
struct GcResult {
  std::uint64_t items = 0, bytes = 0;
  std::uint64_t build_roots = 0;
};

// One directory's stat, to tell whether it changed (DirStamp{} when it is missing).
struct DirStamp {
  bool exists = false;
  std::int64_t mtime_ns = 0, ctime_ns = 0;
  std::uint64_t ino = 0, nlink = 0;
  bool operator==(const DirStamp&) const = default;
};
// What the index serves changes only with one of these: wheels/, last/ and kiln-wheels/.
struct ServedStamp {
  DirStamp wheels, last, kiln_wheels;
  bool operator==(const ServedStamp&) const = default;
};

struct EvictResult {
  std::uint64_t removed_wheels = 0, removed_objects = 0;
  std::uint64_t freed_bytes = 0;         // the apparent sizes of the files removed
  std::uint64_t remaining_bytes = 0;     // of the wheel entries and objects left
  std::vector<std::string> kept_locked;  // keys of entries kept because a build holds them
};

class Store {
 public:
  explicit Store(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }

  // Marks the directory as a kiln cache, making it when missing: <cache>/CACHEDIR.TAG (the Cache
  // Directory Tagging Specification) with kiln's line. Every command that writes a cache calls it
  // first (pipeline::Fetching), and so do staging() and the object store, whoever calls them; a
  // tag another tool wrote is left as it is.
  Expected<void> mark() const;
  // Whether gc and evict may act here: a cache with kiln's tag; one from before the tag when every
  // top-level name is one kiln makes and a folder only kiln's cache has is there (it gets its tag
  // now); a missing or empty directory (nothing to act on). Anything else is a BadInput error
  // naming why: a path that happens to name another directory is never collected.
  Expected<void> recognise() const;

  // The keys of <cache>/wheels, sorted (names beginning with '.' left out).
  std::vector<std::string> keys() const;
  // One entry as every reader takes it (a build's cache hit, ls, verify, gc, the index): the entry
  // directory, entry.json and the wheel each what they claim to be and none a symlink (nothing
  // outside the entry is opened, whoever made the cache), entry.json an object naming a plain *.whl
  // file, that file of the recorded size, and a sha256 recorded; the attestation it names a
  // regular file of at most kMaxAttestationBytes. Does not rehash (damage() does).
  EntryRead read_entry(const std::string& key) const;
  // read_entry's entry when it is usable.
  std::optional<Entry> lookup(const std::string& key) const;
  // What is wrong with a committed entry (its wheel missing, resized or rehashed to another
  // sha256), or nullopt when it is whole.
  std::optional<std::string> damage(const Entry& entry) const;
  // The entry when it is whole (a build's hit: its entry.json's mtime is set to now, the entry's
  // last use for evict(); a cache that cannot be written is no error). A damaged or incomplete
  // entry is removed (the caller holds the key's lock) and described in `removed`, so that the
  // caller builds it again.
  std::optional<Entry> lookup_verified(const std::string& key, std::string& removed) const;
  // Blocks until this process holds the key's lock.
  Expected<Lock> lock(const std::string& key) const;
  // The key's lock when no other process holds it (nor anything keeps it from being taken: `lock`
  // then says what); nullopt else, without waiting.
  std::optional<Lock> try_lock(const std::string& key) const;
  // Moves `wheel` into a new entry for `key` (which must not exist yet) and returns it; `info`'s
  // key, wheel, sha256, size and committed_at are filled in here. A non-empty `attestation` (the
  // wheel's signed statement, attest/wheel.h) is written beside the wheel and named in entry.json.
  Expected<Entry> commit(const std::string& key, const std::filesystem::path& wheel, EntryInfo info,
                         std::string_view attestation = {}) const;
  // The entry's attestation bytes, read without following a link (at most kMaxAttestationBytes);
  // nullopt when it has none.
  Expected<std::optional<std::string>> read_attestation(const Entry& entry) const;
  std::vector<Entry> list() const;
  // Rehashes every entry; each problem names the key and what is wrong.
  std::vector<VerifyProblem> verify() const;
  // Rehashes every object cache entry against the sha256 its header records.
  ObjectsVerified verify_objects() const;
  // Removes a damaged entry so the next build rebuilds it.
  Expected<void> remove(const std::string& key) const;
  // Removes staging leftovers (what <cache>/tmp holds that no live process has locked), what failed
  // or killed git fetches left in <cache>/git, the build roots no build holds (what killed builds
  // left: a live build and the compilers of a killed one hold their root's lock), and object cache
  // entries no build would use (damaged, or stale); with `all`, every entry as well, except
  // those a build holds the key's lock of (they are kept and named), and every object cache entry.
  Expected<GcResult> gc(bool all) const;
  // Removes the wheel entries and objects last used more than `policy.max_age` seconds before
  // `now`, then, while those left hold more than `policy.max_bytes`, the least recently used
  // (oldest mtime first, ties by path). An entry whose key a build holds is kept and named; one
  // used between the scan and its removal is kept. An entry goes as remove() takes it (renamed out
  // of wheels/, then deleted); an object is unlinked. Never follows a link: a link or another file
  // where an entry belongs is removed itself, what it names is never touched; a name in wheels/
  // that is no build key is left alone. Nothing else in the cache is looked at. An empty policy
  // removes nothing and measures what is left.
  Expected<EvictResult> evict(const EvictPolicy& policy, std::time_t now) const;
  // The apparent size of every regular file in the cache besides wheels/ and objects/ (downloads,
  // sysroots, toolkits, envs, …: what evict never removes); links are not followed.
  std::uint64_t other_bytes() const;

  // The object cache: what a compile job made (an object, ".o"; a device part's files packed into
  // one, ".dev"), under the sha256 of its exact commands. An entry is written whole (temp +
  // rename) behind a header that records the sha256 of its bytes; concurrent builds may write the
  // same entry, the last rename wins.
  Expected<void> store_object(const std::string& key, std::string_view suffix,
                              std::string_view bytes) const;
  // An entry's bytes, when they hash to the recorded sha256 (a hit: the file's mtime is set to
  // now, its last use for evict(); errors ignored). A missing, truncated or otherwise damaged entry
  // is a miss (nullopt): a damaged one is removed, its job runs again and stores it anew, and the
  // damaged bytes are never used.
  std::optional<std::string> load_object(const std::string& key, std::string_view suffix) const;
  // The local entry's bytes when they hash to the recorded sha256, as load_object reads them, but
  // only reading: no mtime set, a damaged entry left in place, nothing counted (a plan's probe;
  // the job that restores it later calls load_object).
  std::optional<std::string> peek_object(const std::string& key, std::string_view suffix) const;
  // The remote's entry alone (nullopt without a remote): for a local entry that did not serve.
  std::optional<std::string> load_shared_object(const std::string& key,
                                                std::string_view suffix) const;
  // The object cache's entries, each as "objects/<key[0:2]>/<file>" (temporaries, ".<file>.tmp-…",
  // left out), sorted.
  std::vector<std::string> object_files() const;

  // The shared remote cache (remote.h), when the build has one: an object cache miss is looked up
  // there (and kept locally when found), what is stored locally is stored there too, and wheels
  // pass through fetch_shared_wheel and share_entry.
  void set_shared(std::shared_ptr<SharedCache> shared) { shared_ = std::move(shared); }
  SharedCache* shared() const { return shared_.get(); }
  // The remote's wheel for `key`, written into `dir`, and its sha256. nullopt when the remote has
  // none, or its entry.json fails parse_entry_info (a corrupt miss, warned of), or the wheel's
  // bytes do not match the sha256 it records. Nothing else of the remote's entry.json is kept:
  // the caller writes the local entry from what it knows, after validating the wheel, and judges
  // the attestation the remote keeps beside it (attest::names_wheel).
  struct SharedWheel {
    std::filesystem::path wheel;
    std::string sha256;
    std::string attestation;  // the builder's, when the remote's entry names one ("": none)
  };
  std::optional<SharedWheel> fetch_shared_wheel(const std::string& key,
                                                const std::filesystem::path& dir) const;
  // Stores a committed entry's wheel (and its attestation), then its info, on the remote (nothing
  // when read-only).
  void share_entry(const Entry& entry) const;
  // The object cache's own hits and misses in this process (before the remote is asked).
  struct LocalStats {
    std::uint64_t hits = 0, misses = 0;
  };
  LocalStats local_stats() const { return local_stats_; }

  // A fresh, locked staging directory under <cache>/tmp: "<tmp>/<prefix>XXXXXX".
  Expected<Staging> staging(std::string_view prefix) const;
  // kiln's own wheels (scripts/package --cache), which the index serves on every target: `visit`
  // gets each *.whl of <cache>/kiln-wheels, for reading only, in directory order, until it
  // returns false. A missing folder has none; one that is no directory (a link is not followed)
  // is an error naming it.
  Expected<void> each_kiln_wheel(
      const std::function<bool(const std::filesystem::path&)>& visit) const;
  // The stat of wheels/, last/ and kiln-wheels/: one call tells the index whether to rescan.
  ServedStamp served_stamp() const;
  // Keeps a build's job logs (`from`: its logs/ folder) as <cache>/logs/<key>, replacing what an
  // earlier build of the key kept, and returns where; a copy that fails keeps nothing new.
  std::filesystem::path keep_logs(const std::string& key, const std::filesystem::path& from) const;
  // Records `last` (target, package, key, wheel, backend, inputs) as the package's last build for
  // its target. Written only when it changed; then <cache>/last/.changed is rewritten too, so that
  // one stat of <cache>/last tells the index that what it serves may have changed.
  Expected<void> record_last(const LastBuild& last) const;
  // One record, read without following symlinks (nullopt when missing or unreadable; a document
  // that is not a JSON object is nullopt too). Fields of the wrong type are left empty.
  std::optional<LastBuild> read_last(const std::string& target,
                                     const std::string& normalized_name) const;
  // Every record that names an entry (key and wheel), sorted by target and package.
  std::vector<LastBuild> last_builds() const;

  // The pinned inputs, each named by its key here as every kiln before named it (a cache made by
  // one is used as it is). A file of the download cache, locked for writing it (slots.h).
  Expected<DownloadSlot> download_slot(std::string_view sha256, std::string_view filename) const;
  // The file of the download cache when it is there, for reading only: <cache>/downloads/
  // <sha256[0:2]>/<sha256>/<filename>; with `filename` empty, the least name of those there.
  std::optional<std::filesystem::path> downloaded(std::string_view sha256,
                                                  std::string_view filename) const;
  // Removes `file` and its <sha256> directory when it is a file of this download cache (a path
  // downloaded() or a slot named): an archive refused as hostile is not kept, though its bytes
  // matched the pin. Anything else is left alone (false).
  bool discard_download(const std::filesystem::path& file) const;
  // The bare git mirror of `url`, <cache>/git/<sha256 of the URL>, locked for fetching into it.
  Expected<GitMirror> git_mirror(std::string_view url) const;
  // The directory of `what` when it is whole, for reading only; nullopt when it is not made yet.
  std::optional<std::filesystem::path> find_made(const MadeOnce& what) const;
  // The directory of `what` (made.h), made first by `make` when it is not whole yet. The one place
  // that makes them: one process at a time, in staging, renamed into place.
  Expected<std::filesystem::path> ensure(const MadeOnce& what, const Maker& make) const;

 private:
  friend class BuildRoot;
  friend struct StoreInternals;
  std::filesystem::path tmp_root() const { return root_ / "tmp"; }
  std::filesystem::path wheels() const { return root_ / "wheels"; }
  std::filesystem::path kiln_wheels() const { return root_ / "kiln-wheels"; }
  std::filesystem::path last_root() const { return root_ / "last"; }
  std::filesystem::path objects() const { return root_ / "objects"; }
  std::filesystem::path build_roots() const { return root_ / "build"; }
  // <cache>/locks/<name>.lock: a key's lock is named after the key; a build root's carries the
  // prefix "build-" (a made-once input's lock is beside it, made.cpp).
  std::filesystem::path lock_path(std::string_view name) const;
  // Where a build records the key inputs of its package for `--explain`'s next diff.
  std::filesystem::path last_inputs(const std::string& target,
                                    const std::string& normalized_name) const;
  std::filesystem::path object_path(const std::string& key, std::string_view suffix) const;
  std::filesystem::path download_path(std::string_view sha256, std::string_view filename) const;
  std::filesystem::path entry_dir(const std::string& key) const { return wheels() / key; }
  // gc's pass over <cache>/build (build_root.cpp).
  GcResult gc_build_roots() const;
  // gc's pass over the made-once folders (made.cpp): staging that a process which died left.
  GcResult gc_made() const;
  // gc's pass over <cache>/git (git_gc.cpp): mirrors that pin no commit, and temporary packs a
  // killed fetch left, in mirrors no fetch holds.
  GcResult gc_git_mirrors() const;
  // The local object cache entry alone.
  Expected<void> write_object(const std::string& key, std::string_view suffix,
                              std::string_view bytes) const;
  std::filesystem::path root_;
  mutable bool marked_ = false;  // mark() succeeded once
  std::shared_ptr<SharedCache> shared_;
  mutable LocalStats local_stats_;
};

}  // namespace kiln::cache
