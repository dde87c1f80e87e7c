#include "cli/remote_option.h"

#include <CLI/CLI.hpp>

#include "remote/remote.h"

namespace kiln::cli {

void add_remote_options(CLI::App& sub, RemoteOption& option) {
  sub.add_option("--remote-cache", option.url,
                 "Shared remote cache: http(s):// (WebDAV) or redis:// (default: "
                 "$KILN_REMOTE_CACHE, else kiln.toml beside the cache)");
  sub.add_flag("--remote-cache-readonly", option.readonly,
               "Take from the remote cache, never store into it");
}

std::shared_ptr<cache::SharedCache> open_shared_cache(const RemoteOption& option,
                                                      const std::filesystem::path& cache) {
  remote::Config config = remote::load_config(option.url, option.readonly, cache).value();
  if (config.url.empty()) return nullptr;
  auto backend = remote::open_remote(config).value();
  return std::make_shared<cache::SharedCache>(std::move(backend), config.readonly,
                                              config.lease_ttl);
}

nlohmann::json remote_json(const cache::SharedCache& shared) {
  nlohmann::json out = shared.stats().to_json();
  out["url"] = shared.describe();
  out["readonly"] = shared.readonly();
  return out;
}

}  // namespace kiln::cli
