// The shared remote cache: the same entries as the local cache (objects, device parts, manifests,
// wheels) on a server several machines use, under names that mirror the local layout
// ("objects/<key[0:2]>/<key><suffix>", "wheels/<key>/entry.json", "wheels/<key>/<wheel>").
//
// `Remote` is the server: one backend per file in builder/remote/ (a WebDAV or other HTTP cache,
// Redis), a fake in tests. `SharedCache` is kiln's policy over it, in one place:
//   - every entry is self-verifying (the object cache's header: its bytes' sha256); an entry that
//     does not verify is a miss, reported once and overwritten by the next store;
//   - the remote never fails a build: the first error (down, too slow, refusing, a wrong token)
//     is one warning and the remote is off for the rest of the run; the build goes on locally;
//   - every reply is bounded by what its request can return (kMaxRemote* below: an entry.json's
//     few KB, an object's or a wheel's size bound), checked against the size the server announces
//     before a byte of the body is read; an answer over the bound is refused unread and counted as
//     a corrupt entry (a miss, overwritten by the next store): no entry kiln stores is that large,
//     so the fault is that entry's, and the remote stays on;
//   - every request has a deadline (KILN_REMOTE_DEADLINE, remote/remote.h), not an idle timeout;
//     one that passes it is an error (the remote is off); SIGINT/SIGTERM end a request within a
//     second, without a warning, and the build then stops as an interrupted build does (exit 130);
//   - read-only mode never writes (untrusted CI);
//   - counters for `build --json`: hits, misses, bytes and seconds, leases waited.
// A hash proves an entry intact, not who wrote it: wheels from the remote pass kiln's validation
// before they are committed locally (the pipeline does that); docs/scale.md has the trust model.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::cache {

// The largest payload (after the entry header) a remote entry of each kind may have; a reply over
// its bound is refused before its body is read.
//   - entry.json: a few hundred bytes as kiln writes it (package, version, wheel, sha256, archs);
//     the bound is the local reader's (cache/entry.h, kMaxEntryJsonBytes);
//   - a content-key manifest (`.deps`): up to 16 dependency sets of a translation unit's headers,
//     a few hundred KB each for a CUDA file that includes CCCL and torch;
//   - an object or device part: a host object is a few MB, a device part of a large CUDA file
//     (flash-attention's) tens of MB, a fat binary of many archs a few hundred MB: 1 GiB leaves
//     room and still keeps a hostile server from making kiln allocate what it announces;
//   - a wheel: 2 GiB (PyPI's own limit on a file is lower; the HTTP backend had this cap before).
inline constexpr std::uint64_t kMaxRemoteEntryJson = std::uint64_t{64} << 10;
inline constexpr std::uint64_t kMaxRemoteManifest = std::uint64_t{64} << 20;
inline constexpr std::uint64_t kMaxRemoteObject = std::uint64_t{1} << 30;
inline constexpr std::uint64_t kMaxRemoteWheel = std::uint64_t{2} << 30;
// The bound of an object cache entry by its suffix: ".deps" a manifest, else an object.
std::uint64_t remote_object_bound(std::string_view suffix);

// What a server answered to a get().
struct Fetched {
  enum class Kind {
    Found,     // `bytes` holds the entry
    Missing,   // no entry under the name
    TooLarge,  // refused unread: the answer was larger than the request's bound (`why` says so)
  };
  Kind kind = Kind::Missing;
  std::string bytes;
  std::string why;
  static Fetched found(std::string bytes) { return {Kind::Found, std::move(bytes), {}}; }
  static Fetched missing() { return {}; }
  static Fetched too_large(std::string why) { return {Kind::TooLarge, {}, std::move(why)}; }
};

class Remote {
 public:
  virtual ~Remote() = default;
  // The server as messages name it: scheme, host, port and path, never credentials.
  virtual std::string describe() const = 0;
  // The bytes stored under `name`, at most `max_bytes` of them: an answer that announces (or,
  // announcing nothing, sends) more is TooLarge, its body never read (or read no further); an
  // error when the server did not answer as it should (down, past the deadline, refused,
  // unauthorised), Error::interrupted() on SIGINT/SIGTERM.
  virtual Expected<Fetched> get(const std::string& name, std::uint64_t max_bytes) = 0;
  virtual Expected<void> put(const std::string& name, std::string_view bytes) = 0;
  // Compile once: servers that can grant a lease per name (Redis: SET NX with a TTL) do, so that
  // concurrent workers wait for the one compiling; the others always grant (duplicates allowed).
  virtual bool has_leases() const { return false; }
  // Takes the lease on `name` for `ttl`; false when another worker holds it.
  virtual Expected<bool> take_lease(const std::string& name, std::chrono::seconds ttl) {
    (void)name;
    (void)ttl;
    return true;
  }
  virtual Expected<void> release_lease(const std::string& name) {
    (void)name;
    return {};
  }
};

struct SharedStats {
  std::uint64_t hits = 0, misses = 0, corrupt = 0, stores = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0;
  double seconds = 0;
  std::uint64_t leases_taken = 0, leases_waited = 0;
  bool failed = false;  // the remote was turned off by an error
  nlohmann::json to_json() const;
};

class SharedCache {
 public:
  SharedCache(std::unique_ptr<Remote> remote, bool readonly,
              std::chrono::seconds lease_ttl = std::chrono::seconds(600))
      : remote_(std::move(remote)), readonly_(readonly), lease_ttl_(lease_ttl) {}
  // The verified payload of `name`, at most `max_bytes` (a kMaxRemote* bound) long, or nullopt
  // (a miss, a damaged or too large entry, or the remote off).
  std::optional<std::string> get(const std::string& name, std::uint64_t max_bytes);
  // Stores `bytes` under `name` behind the header that verifies them (nothing when read-only or
  // off; an error turns the remote off).
  void put(const std::string& name, std::string_view bytes);
  bool readonly() const { return readonly_; }
  bool on() const { return !stats_.failed; }
  std::string describe() const { return remote_->describe(); }
  // Leases (compile once): whether the remote grants them and, if so, whether this worker now
  // holds `name`'s. Without leases, or with the remote off, every lease is granted.
  bool has_leases() const { return on() && remote_->has_leases(); }
  bool take_lease(const std::string& name);
  void release_lease(const std::string& name);
  void count_wait() { stats_.leases_waited++; }
  const SharedStats& stats() const { return stats_; }

 private:
  void off(const Error& why);
  std::unique_ptr<Remote> remote_;
  bool readonly_;
  std::chrono::seconds lease_ttl_;
  SharedStats stats_;
};

// What entry_payload says of bytes without the header (an older kiln's entry, or a truncated one).
inline constexpr std::string_view kNoEntryHeader =
    "no kiln-object header (written by an older kiln, or truncated)";

// An entry as the object cache and the remote store it: "kiln-object 1 <sha256 of the bytes>\n"
// then the bytes; and back, with the sha256 checked (an error says what is wrong).
std::string frame_entry(std::string_view bytes);
Expected<std::string_view> entry_payload(std::string_view entry);

// The remote's names for an object cache entry and a wheel entry's two files.
std::string remote_object_name(const std::string& key, std::string_view suffix);
std::string remote_wheel_info_name(const std::string& key);
std::string remote_wheel_name(const std::string& key, const std::string& wheel);

}  // namespace kiln::cache
