// The content-addressed wheel store: <cache>/wheels/<build key>/{<wheel>, entry.json}.
// Entries appear whole (staged in <cache>/tmp, renamed into place) and are locked per key so two
// concurrent builds of one key build it once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "core/lock.h"

namespace kiln::cache {

struct Entry {
  std::string key;
  std::filesystem::path dir;
  std::filesystem::path wheel;  // absolute path of the wheel file
  std::string sha256;
  std::uint64_t size = 0;
  nlohmann::json info;  // package, version, target, archs, committed_at, …
};

// The per-key build lock.
using Lock = FileLock;

struct VerifyProblem {
  std::string key;
  std::string message;
};

class Store {
 public:
  explicit Store(std::filesystem::path root) : root_(std::move(root)) {}
  const std::filesystem::path& root() const { return root_; }

  std::optional<Entry> lookup(const std::string& key) const;
  // Blocks until this process holds the key's lock.
  Expected<Lock> lock(const std::string& key) const;
  // Moves `wheel` into a new entry for `key` (which must not exist yet) and returns it.
  Expected<Entry> commit(const std::string& key, const std::filesystem::path& wheel, nlohmann::json info) const;
  std::vector<Entry> list() const;
  // Rehashes every entry; each problem names the key and what is wrong.
  std::vector<VerifyProblem> verify() const;
  // Removes a damaged entry so the next build rebuilds it.
  Expected<void> remove(const std::string& key) const;
  // Removes staging leftovers (tmp/, build roots of dead processes); with `all`, every entry.
  Expected<std::uint64_t> gc(bool all) const;

  // A fresh staging directory under <cache>/tmp (removed with the TempDir unless released).
  std::filesystem::path tmp_root() const { return root_ / "tmp"; }
  std::filesystem::path downloads() const { return root_ / "downloads"; }
  std::filesystem::path sysroots() const { return root_ / "sysroots"; }
  std::filesystem::path objects() const { return root_ / "objects"; }
  std::filesystem::path logs() const { return root_ / "logs"; }
  std::filesystem::path envs() const { return root_ / "envs"; }  // the setuptools backend's environments

 private:
  std::filesystem::path entry_dir(const std::string& key) const { return root_ / "wheels" / key; }
  std::filesystem::path root_;
};

}  // namespace kiln::cache
