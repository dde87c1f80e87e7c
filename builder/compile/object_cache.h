// The native backend's object cache: what its jobs made, under the content keys the job graph
// computes (content_key.h: a job's commands, the tools' identities and the sha256 of every file
// it read). Three kinds of entry: an object file (a C++ object, a host part, a fat binary's
// object, a whole-file nvcc object), a device part (the module id, stub and images one arch's
// device pass wrote, restored to the same paths) and a manifest (the dependency sets a job's
// runs read, under its command key).
//
// The planner only asks (has_object, has_device_part, peek_manifest: nothing is written, not the
// build root, not the cache: no mtime set, no damaged entry removed, no remote entry kept); the
// jobs restore and store when they run (restore_*, store_*, load_manifest).
//
// An interface, so that the job graph can be planned and run in tests against an in-memory fake;
// the real one keeps the entries in the cache's objects/ folder, whose layout and integrity
// (recorded sha256, verified on every reuse) cache::Store owns.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cache/store.h"
#include "core/expected.h"

namespace kiln::compile {

class ObjectCache {
 public:
  virtual ~ObjectCache() = default;
  // The planner's probes, which write nothing: whether restore_object(key, …) and
  // restore_device_part(key, files) would find a whole entry now (the local one, else the
  // remote's: read and dropped), and the local manifest load_manifest would read.
  virtual bool has_object(const std::string& key) = 0;
  virtual bool has_device_part(const std::string& key,
                               const std::vector<std::filesystem::path>& files) = 0;
  virtual std::optional<std::string> peek_manifest(const std::string& command_key) = 0;
  // Puts the cached object `key` at `object`; false on a miss (no entry, a damaged one, or the
  // file could not be written): the job then runs the command that makes it.
  virtual bool restore_object(const std::string& key, const std::filesystem::path& object) = 0;
  virtual Expected<void> store_object(const std::string& key,
                                      const std::filesystem::path& object) = 0;
  // Puts a cached device part's files back where its pass wrote them: `files`, in order, must be
  // the paths it was stored from (else it is a miss).
  virtual bool restore_device_part(const std::string& key,
                                   const std::vector<std::filesystem::path>& files) = 0;
  virtual Expected<void> store_device_part(const std::string& key,
                                           const std::vector<std::filesystem::path>& files) = 0;
  // A job's manifest (content_key.h): the dependency sets recorded under its command key.
  virtual std::optional<std::string> load_manifest(const std::string& command_key) = 0;
  virtual Expected<void> store_manifest(const std::string& command_key, std::string_view text) = 0;
  // The remote cache's manifest alone, when there is a remote (other workers' dependency sets,
  // for a job whose local manifest has none that matches).
  virtual std::optional<std::string> load_shared_manifest(const std::string& command_key) {
    (void)command_key;
    return std::nullopt;
  }
  // Compile once across workers, where a remote cache grants leases (cache/remote.h): this
  // worker makes the object of `command_key` only while it holds its lease. Without leases
  // every lease is granted.
  virtual bool has_leases() const { return false; }
  virtual bool take_lease(const std::string& command_key) {
    (void)command_key;
    return true;
  }
  virtual void release_lease(const std::string& command_key) { (void)command_key; }
  virtual void count_wait() {}
};

// No cache at all (`kiln rebuild`, which must compile every job): every probe and restore misses,
// nothing is stored.
class NoObjectCache final : public ObjectCache {
 public:
  bool has_object(const std::string&) override { return false; }
  bool has_device_part(const std::string&, const std::vector<std::filesystem::path>&) override {
    return false;
  }
  std::optional<std::string> peek_manifest(const std::string&) override { return std::nullopt; }
  bool restore_object(const std::string&, const std::filesystem::path&) override { return false; }
  Expected<void> store_object(const std::string&, const std::filesystem::path&) override {
    return {};
  }
  bool restore_device_part(const std::string&, const std::vector<std::filesystem::path>&) override {
    return false;
  }
  Expected<void> store_device_part(const std::string&,
                                   const std::vector<std::filesystem::path>&) override {
    return {};
  }
  std::optional<std::string> load_manifest(const std::string&) override { return std::nullopt; }
  Expected<void> store_manifest(const std::string&, std::string_view) override { return {}; }
};

// Over the cache's objects/ folder.
class StoreObjectCache : public ObjectCache {
 public:
  explicit StoreObjectCache(const cache::Store& store) : store_(store) {}
  bool has_object(const std::string& key) override;
  bool has_device_part(const std::string& key,
                       const std::vector<std::filesystem::path>& files) override;
  std::optional<std::string> peek_manifest(const std::string& command_key) override;
  bool restore_object(const std::string& key, const std::filesystem::path& object) override;
  Expected<void> store_object(const std::string& key, const std::filesystem::path& object) override;
  bool restore_device_part(const std::string& key,
                           const std::vector<std::filesystem::path>& files) override;
  Expected<void> store_device_part(const std::string& key,
                                   const std::vector<std::filesystem::path>& files) override;
  std::optional<std::string> load_manifest(const std::string& command_key) override;
  Expected<void> store_manifest(const std::string& command_key, std::string_view text) override;
  std::optional<std::string> load_shared_manifest(const std::string& command_key) override;
  bool has_leases() const override;
  bool take_lease(const std::string& command_key) override;
  void release_lease(const std::string& command_key) override;
  void count_wait() override;

 private:
  const cache::Store& store_;
};

// A device part's files as one entry: "kiln-device-part 1\n", then each file as
// "<path>\n<size>\n<bytes>".
using PackedFiles = std::vector<std::pair<std::filesystem::path, std::string>>;
std::string pack_files(const PackedFiles& files);
Expected<PackedFiles> unpack_files(std::string_view data);

}  // namespace kiln::compile
