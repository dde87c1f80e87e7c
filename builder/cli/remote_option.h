// The remote cache options `build` and `index export` share, and the cache they open.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/remote.h"

namespace CLI {
class App;
}  // namespace CLI

namespace kiln::cli {

struct RemoteOption {
  std::optional<std::string> url;  // --remote-cache
  bool readonly = false;           // --remote-cache-readonly
};

// Adds --remote-cache URL and --remote-cache-readonly to `sub`.
void add_remote_options(CLI::App& sub, RemoteOption& option);

// The remote cache (remote/remote.h says where its URL comes from: the option, the environment,
// kiln.toml beside `cache`), or null when none is configured.
std::shared_ptr<cache::SharedCache> open_shared_cache(const RemoteOption& option,
                                                      const std::filesystem::path& cache);

// The remote's counters for --json, with its URL (never credentials) and mode.
nlohmann::json remote_json(const cache::SharedCache& shared);

}  // namespace kiln::cli
