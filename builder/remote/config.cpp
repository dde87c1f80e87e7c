// Where a build's remote cache comes from (flag, environment, kiln.toml), its token and its
// deadline, and the backend for its URL.
#include <chrono>
#include <cstdlib>

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/settings.h"
#include "remote/remote.h"

namespace kiln::remote {

namespace fs = std::filesystem;

namespace {

// The first line of a token file, without its newline.
Expected<std::string> read_token(const fs::path& file) {
  KILN_TRY(std::string text, read_file(file, 4096));
  std::string token = std::string(trim(text.substr(0, text.find('\n'))));
  if (token.empty()) return Error::bad_input(cat(file.string(), ": the token file is empty"));
  return token;
}

// $KILN_REMOTE_DEADLINE: a duration (core/strings.h's parse_duration) of 1 s to 1 d.
Expected<std::chrono::milliseconds> deadline_from(const std::string& text) {
  if (text.empty()) return Config::kDefaultDeadline;
  auto seconds = parse_duration(text);
  if (!seconds || *seconds < 1 || *seconds > 86400)
    return Error::bad_input(cat("KILN_REMOTE_DEADLINE=", text.substr(0, 40),
                                ": not a duration of 1 s to 1 d (such as 90s, 5m)"));
  return std::chrono::milliseconds(*seconds * 1000);
}

bool has_credentials(const std::string& url) {
  auto scheme = url.find("://");
  if (scheme == std::string::npos) return false;
  auto authority = url.substr(scheme + 3, url.find('/', scheme + 3) - (scheme + 3));
  return authority.find('@') != std::string::npos;
}

}  // namespace

Expected<Config> load_config(const std::optional<std::string>& flag_url, bool readonly_flag,
                             const fs::path& cache_root) {
  KILN_TRY(manifest::Settings settings,
           manifest::load_settings(cache_root.parent_path() / "kiln.toml"));
  const manifest::RemoteCacheSettings& file = settings.remote_cache;
  Config c;
  c.url = flag_url                                  ? *flag_url
          : !env_value("KILN_REMOTE_CACHE").empty() ? env_value("KILN_REMOTE_CACHE")
                                                    : file.url;
  if (c.url.empty()) return c;
  if (has_credentials(c.url))
    return Error::bad_input(
        "the remote cache URL holds credentials, which would show in process lists and logs; "
        "give the token in KILN_REMOTE_CACHE_TOKEN or a token file (KILN_REMOTE_CACHE_TOKEN_FILE, "
        "or token-file in kiln.toml)");
  c.readonly = readonly_flag || env_value("KILN_REMOTE_CACHE_READONLY") == "1" || file.readonly;
  c.lease_ttl = std::chrono::seconds(file.lease_ttl);
  KILN_TRY(c.deadline, deadline_from(env_value("KILN_REMOTE_DEADLINE")));
  std::string token_file = !env_value("KILN_REMOTE_CACHE_TOKEN_FILE").empty()
                               ? env_value("KILN_REMOTE_CACHE_TOKEN_FILE")
                               : file.token_file;
  if (!env_value("KILN_REMOTE_CACHE_TOKEN").empty()) {
    c.token = env_value("KILN_REMOTE_CACHE_TOKEN");
  } else if (!token_file.empty()) {
    KILN_TRY(c.token, read_token(token_file));
  }
  return c;
}

Expected<std::unique_ptr<cache::Remote>> open_remote(const Config& config) {
  const std::string scheme = lower(config.url.substr(0, config.url.find("://")));
  if (scheme == "http" || scheme == "https") return http_remote(config);
  if (scheme == "redis") return redis_remote(config);
  return Error::bad_input(
      cat("remote cache ", config.url, ": kiln knows http://, https:// and redis:// caches"));
}

}  // namespace kiln::remote
