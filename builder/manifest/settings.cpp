#include "manifest/settings.h"

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/limits.h"
#include "manifest/target.h"
#include "manifest/toml_reader.h"

namespace kiln::manifest {

namespace fs = std::filesystem;

namespace {

Settings parse_settings_text(const SourceText& source, const fs::path& dir) {
  toml::table root = parse_toml(source);
  TableReader top(source, root, "", {"remote-cache"});
  Settings s;
  const toml::table* remote = top.table("remote-cache");
  if (!remote) return s;
  TableReader r(source, *remote, "remote-cache", {"url", "token-file", "readonly", "lease-ttl"});
  s.remote_cache.url = r.string("url").value_or("");
  r.check_length("url", s.remote_cache.url, kMaxUrlBytes);
  s.remote_cache.token_file = r.string("token-file").value_or("");
  s.remote_cache.readonly = r.boolean("readonly").value_or(false);
  s.remote_cache.lease_ttl = r.integer("lease-ttl").value_or(600);
  if (s.remote_cache.lease_ttl < 10 || s.remote_cache.lease_ttl > 86400)
    r.fail("lease-ttl", "a lease lasts 10 to 86400 seconds");
  if (!s.remote_cache.token_file.empty() && fs::path(s.remote_cache.token_file).is_relative())
    s.remote_cache.token_file = (dir / s.remote_cache.token_file).string();
  return s;
}

// A path in the user's configuration: "~/x" under `home`, a relative one under the file's
// directory.
std::string config_path(const TableReader& t, std::string_view key, const fs::path& dir,
                        const fs::path& home) {
  std::string value = t.string(key).value_or("");
  t.check_length(key, value, 4096);
  if (value.empty()) return "";
  if (value == "~" || value.starts_with("~/"))
    return (home / value.substr(std::min<std::size_t>(value.size(), 2)))
        .lexically_normal()
        .string();
  if (value.starts_with("~")) t.fail(key, "only '~/' is expanded (no '~user/')");
  return fs::path(value).is_absolute() ? value : (dir / value).lexically_normal().string();
}

UserConfig parse_user(const SourceText& source, const fs::path& dir, const fs::path& home) {
  toml::table root = parse_toml(source);
  TableReader t(source, root, "",
                {"cache", "manifests", "patches", "target", "jobs", "offline", "index-url",
                 "sandbox", "signing-key"});
  UserConfig c;
  c.cache = config_path(t, "cache", dir, home);
  c.manifests = config_path(t, "manifests", dir, home);
  c.patches = config_path(t, "patches", dir, home);
  c.signing_key = config_path(t, "signing-key", dir, home);
  if (t.has("target")) {
    c.targets = root["target"].is_string()
                    ? std::vector<std::string>{t.required_string("target")}
                    : t.strings("target").value_or(std::vector<std::string>{});
    t.check_lengths("target", c.targets, kMaxTargetNameBytes);
    if (c.targets.empty()) t.fail("target", "an empty list (leave 'target' out for \"default\")");
  }
  if (auto jobs = t.integer("jobs")) {
    if (*jobs < 0 || *jobs > 4096) t.fail("jobs", "jobs is 0 (one per core) to 4096");
    c.jobs = static_cast<int>(*jobs);
  }
  c.offline = t.boolean("offline");
  c.index_url = t.string("index-url").value_or("");
  t.check_length("index-url", c.index_url, kMaxUrlBytes);
  if (!c.index_url.empty() && !is_index_url(c.index_url))
    t.fail("index-url", "expected an http(s):// URL of a package index");
  c.sandbox = t.string("sandbox").value_or("");
  if (!c.sandbox.empty() && c.sandbox != "auto" && c.sandbox != "required" && c.sandbox != "off")
    t.fail("sandbox", "expected \"auto\", \"required\" or \"off\"");
  return c;
}

}  // namespace

Expected<UserConfig> load_user_config(const fs::path& file, const fs::path& home) {
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return UserConfig{};  // none, /dev/null, never a FIFO
  KILN_TRY(std::string text, read_file(file, 1 << 20));
  try {
    return parse_user(SourceText{file.string(), text}, file.parent_path(), home);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<Settings> load_settings(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return Settings{};
  KILN_TRY(std::string text, read_file(file, 1 << 20));
  try {
    return parse_settings_text(SourceText{file.string(), text}, file.parent_path());
  } catch (const KilnError& e) {
    return e.error();
  }
}

}  // namespace kiln::manifest
