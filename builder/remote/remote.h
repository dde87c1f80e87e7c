// The shared remote cache's backends (cache/remote.h has the interface and kiln's policy over
// it), one per file: http.cpp (GET, HEAD-less, PUT: a stock WebDAV server such as nginx's dav
// module, or any HTTP cache that stores what is PUT at a path) and redis.cpp (GET, SET, and
// leases with SET NX and a TTL, through resp.h, kiln's own bounded client). Where the remote comes
// from, its credentials and its deadline: config.cpp. Every request has a deadline for the whole
// of it (not an idle timeout) and ends within a second of SIGINT/SIGTERM.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cache/remote.h"
#include "core/expected.h"

namespace kiln::remote {

struct Config {
  std::string url;    // "" when the build has no remote
  std::string token;  // a bearer token (HTTP) or the AUTH password (Redis); never in the URL
  bool readonly = false;
  std::chrono::seconds lease_ttl{600};
  // How long one request (a GET or PUT of an entry, a lease) may take in all; past it the remote
  // is off for the run. $KILN_REMOTE_DEADLINE ("90s", "5m"), else kDefaultDeadline: a 2 GiB wheel
  // needs 18 MB/s to arrive in time, a wheel of a few hundred MB (flash-attention's) 3 MB/s.
  static constexpr std::chrono::milliseconds kDefaultDeadline{120'000};
  std::chrono::milliseconds deadline = kDefaultDeadline;
};

// The remote cache of a build: `--remote-cache URL` (`flag_url`), else $KILN_REMOTE_CACHE, else
// `url` in the [remote-cache] table of kiln.toml beside the cache (in its parent directory). The
// token: $KILN_REMOTE_CACHE_TOKEN, else the file $KILN_REMOTE_CACHE_TOKEN_FILE or kiln.toml's
// `token-file` names (its first line). Read-only: `readonly_flag`, $KILN_REMOTE_CACHE_READONLY=1
// or kiln.toml's `readonly = true`. A URL with credentials in it is refused: they would show in
// process lists and logs. The deadline: $KILN_REMOTE_DEADLINE, a duration of 1 s to 1 d ("3s",
// "2m"); anything else is refused.
Expected<Config> load_config(const std::optional<std::string>& flag_url, bool readonly_flag,
                             const std::filesystem::path& cache_root);

// The backend for the URL's scheme: http(s):// or redis://host[:port][/db].
Expected<std::unique_ptr<cache::Remote>> open_remote(const Config& config);
std::unique_ptr<cache::Remote> http_remote(const Config& config);
Expected<std::unique_ptr<cache::Remote>> redis_remote(const Config& config);

}  // namespace kiln::remote
