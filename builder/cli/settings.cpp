#include "cli/settings.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>

#include "cli/build_commit.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/sandbox.h"
#include "core/strings.h"
#include "manifest/settings.h"
#include "manifest/target.h"

namespace kiln::cli {

namespace fs = std::filesystem;

namespace {

fs::path home() {
  std::string h = env_value("HOME");
  return h.empty() ? fs::path("/root") : fs::path(h);
}

// $XDG_CONFIG_HOME/kiln/config.toml (an absolute XDG_CONFIG_HOME only, as the spec says), else
// ~/.config/kiln/config.toml, when it exists; KILN_CONFIG names another file, which must exist
// (a mistyped path must not quietly give another cache to `kiln cache gc --all`), and
// KILN_CONFIG=/dev/null none.
std::optional<fs::path> config_file() {
  if (std::string f = env_value("KILN_CONFIG"); !f.empty()) {
    if (f == "/dev/null") return std::nullopt;
    std::error_code ec;
    if (!fs::is_regular_file(f, ec))
      raise(Error::bad_input(cat("$KILN_CONFIG: ", printable_excerpt(f, 200),
                                 fs::exists(f, ec) ? " is not a regular file" : " does not exist",
                                 " (KILN_CONFIG=/dev/null: no configuration file)")));
    return f;
  }
  std::string xdg = env_value("XDG_CONFIG_HOME");
  fs::path base = !xdg.empty() && xdg.front() == '/' ? fs::path(xdg) : home() / ".config";
  return base / "kiln" / "config.toml";
}

fs::path cache_home() {
  std::string xdg = env_value("XDG_CACHE_HOME");
  return !xdg.empty() && xdg.front() == '/' ? fs::path(xdg) : home() / ".cache";
}

bool parse_bool(const std::string& name, const std::string& value) {
  std::string v = lower(value);
  if (v == "1" || v == "true" || v == "yes" || v == "on") return true;
  if (v == "0" || v == "false" || v == "no" || v == "off" || v.empty()) return false;
  raise(Error::bad_input(cat("$", name, ": '", printable_excerpt(value, 40),
                             "' is not a boolean (1, true, yes or 0, false, no)")));
}

int parse_jobs(const std::string& value) {
  int n = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (ec != std::errc() || end != value.data() + value.size() || n < 0 || n > 4096)
    raise(Error::bad_input(cat("$KILN_JOBS: '", printable_excerpt(value, 40),
                               "' is not a number of jobs (0 for one per core, up to 4096)")));
  return n;
}

std::string default_cache() {
  if (auto checkout = running_checkout()) return (*checkout / "cache").string();
  return (cache_home() / "kiln" / "cache").string();
}

// kiln's own manifests, patches and kernels where an installed kiln keeps them: share/kiln/ beside
// the bin/ of its executable (the venv of kiln's wheel, scripts/portable's folder).
std::optional<fs::path> installed_data() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  fs::path share = exe.parent_path().parent_path() / "share" / "kiln";
  if (ec || !fs::is_directory(share / "manifests", ec)) return std::nullopt;
  return share;
}

// kiln's own copy of a folder of its sources: the installed one, else the checkout's.
fs::path own(const std::string& folder) {
  if (auto data = installed_data()) return *data / folder;
  return fs::path(build_source_dir()) / folder;
}

std::string default_manifests() {
  std::error_code ec;
  if (fs::is_directory("manifests", ec)) return "manifests";
  return own("manifests").string();
}

// The environment over the configuration file.
void apply_environment(Defaults& d) {
  if (std::string v = env_value("KILN_CACHE"); !v.empty()) d.cache = v;
  if (std::string v = env_value("KILN_MANIFESTS"); !v.empty()) d.manifests = v;
  if (std::string v = env_value("KILN_PATCHES"); !v.empty()) d.patches = v;
  if (std::string v = env_value("KILN_SIGNING_KEY"); !v.empty()) d.signing_key = v;
  if (std::string v = env_value("KILN_TARGET"); !v.empty()) d.targets = split(v, ",", true);
  if (std::string v = env_value("KILN_JOBS"); !v.empty()) d.jobs = parse_jobs(v);
  if (const char* v = std::getenv("KILN_OFFLINE")) d.offline = parse_bool("KILN_OFFLINE", v);
  if (std::string v = env_value("KILN_SANDBOX"); !v.empty()) {
    if (!parse_sandbox_mode(v))
      raise(Error::bad_input(cat("$KILN_SANDBOX: '", printable_excerpt(v, 40),
                                 "' is not a sandbox mode (auto, required or off)")));
    d.sandbox = v;
  }
  if (std::string v = env_value("KILN_INDEX_URL"); !v.empty()) {
    if (!manifest::is_index_url(v))
      raise(Error::bad_input(cat("$KILN_INDEX_URL: '", printable_excerpt(v, 80),
                                 "' is not an http(s):// URL of a package index")));
    d.index_url = v;
  }
}

}  // namespace

Defaults load_defaults() {
  Defaults d;
  manifest::UserConfig c;
  if (std::optional<fs::path> file = config_file()) {
    c = manifest::load_user_config(*file, home()).value();
    std::error_code ec;
    if (fs::is_regular_file(*file, ec)) d.config = *file;
  }
  d.cache = c.cache;
  d.manifests = c.manifests;
  d.patches = c.patches;
  d.signing_key = c.signing_key;
  d.targets = c.targets;
  d.jobs = c.jobs;
  d.offline = c.offline.value_or(false);
  d.index_url = c.index_url;
  if (!c.sandbox.empty()) d.sandbox = c.sandbox;
  apply_environment(d);
  if (d.cache.empty()) d.cache = default_cache();
  if (d.manifests.empty()) d.manifests = default_manifests();
  return d;
}

std::optional<fs::path> running_checkout() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec || build_source_dir().empty()) return std::nullopt;
  fs::path source = fs::weakly_canonical(fs::path(build_source_dir()), ec);
  if (ec || !fs::is_directory(source / "manifests", ec)) return std::nullopt;
  auto [end, _] = std::mismatch(source.begin(), source.end(), exe.begin(), exe.end());
  if (end != source.end()) return std::nullopt;
  return source;
}

fs::path default_patches(const fs::path& manifests) {
  fs::path beside = absolute_path(manifests).parent_path() / "patches";
  std::error_code ec;
  if (fs::is_directory(beside, ec)) return beside;
  return own("patches");
}

}  // namespace kiln::cli
