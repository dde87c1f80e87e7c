// kiln.toml: a cache's settings, in the directory that holds the cache (beside it). Today one
// table, [remote-cache]: the shared remote cache builds use (cache/remote.h, docs/scale.md).
//
//   [remote-cache]
//   url = "redis://cache.example:6379/0"   # or an http(s):// WebDAV or HTTP cache
//   token-file = "remote-cache.token"      # relative to kiln.toml; never the token itself
//   readonly = false
//   lease-ttl = 600                         # seconds a worker may hold a compile lease
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/expected.h"

namespace kiln::manifest {

struct RemoteCacheSettings {
  std::string url;
  std::string token_file;  // absolute, or "" when none
  bool readonly = false;
  std::int64_t lease_ttl = 600;
};

struct Settings {
  RemoteCacheSettings remote_cache;
};

// The user's configuration ($XDG_CONFIG_HOME/kiln/config.toml, else ~/.config/kiln/config.toml):
// defaults for every command, below flags and KILN_* variables (cli/settings.h).
//
//   cache = "/scratch/kiln-cache"       # paths: absolute, ~/..., or relative to this file
//   manifests = "~/src/my-manifests"
//   patches = "~/src/my-patches"
//   target = ["default", "gpu-host"]    # or one name
//   jobs = 8
//   offline = false
//   index-url = "https://mirror.example/simple/"
//   sandbox = "required"                # auto (default), required or off
//   signing-key = "~/.config/kiln/signing-key.pem"   # `kiln key generate`'s private key
struct UserConfig {
  std::string cache, manifests, patches;  // absolute, or "" when not set
  std::string signing_key;                // absolute, or "" when not set
  std::vector<std::string> targets;
  std::optional<int> jobs;
  std::optional<bool> offline;
  std::string index_url;
  std::string sandbox;  // "auto", "required", "off", or "" when not set
};

// Reads `file` (no file: nothing set); `home` expands a leading "~/". Unknown keys, wrong types and
// bad values are located errors.
Expected<UserConfig> load_user_config(const std::filesystem::path& file,
                                      const std::filesystem::path& home);

// Reads `file` (no file: the defaults). Unknown keys, wrong types and bad values are located
// errors ("kiln.toml:3:7: ...").
Expected<Settings> load_settings(const std::filesystem::path& file);

}  // namespace kiln::manifest
