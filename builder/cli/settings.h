// Where the global defaults come from, strongest first: a command's flag, the KILN_* variables, the
// user's configuration file (manifest/settings.h's UserConfig), kiln's own default. README's
// "Configuration" says the same.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

struct Defaults {
  std::string cache;      // KILN_CACHE, cache: else the checkout's cache/ or ~/.cache/kiln/cache
  std::string manifests;  // KILN_MANIFESTS, manifests: else ./manifests, or kiln's own
  std::string patches;    // KILN_PATCHES, patches: else "" (beside the manifests, or kiln's own)
  std::vector<std::string> targets;  // KILN_TARGET (comma-separated), target: else none
  std::optional<int> jobs;           // KILN_JOBS, jobs
  bool offline = false;              // KILN_OFFLINE (1, true, yes / 0, false, no), offline
  std::string index_url;             // KILN_INDEX_URL, index-url: else pip's or uv's settings
  std::string sandbox = "auto";      // KILN_SANDBOX, sandbox: auto, required or off
  std::string signing_key;           // KILN_SIGNING_KEY, signing-key: else none (nothing signed)
  std::filesystem::path config;      // the configuration file that was read, or ""
};

// Reads the environment and the user's configuration; a bad value raises a KilnError naming where
// it came from.
Defaults load_defaults();

// The checkout kiln runs from: the source tree it was built from (build_source_dir()), when the
// running binary lies inside it (as build/*/builder/kiln does) and it still holds manifests/.
std::optional<std::filesystem::path> running_checkout();

// The patches root for a manifests directory when neither --patches, KILN_PATCHES nor the user's
// configuration names one: the patches/ beside it when there is one, else kiln's own (installed in
// share/kiln/ beside its bin/, else the checkout's).
std::filesystem::path default_patches(const std::filesystem::path& manifests);

}  // namespace kiln::cli
