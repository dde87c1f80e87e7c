#include "manifest/settings.h"

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/limits.h"
#include "manifest/toml_reader.h"

namespace kiln::manifest {

namespace fs = std::filesystem;

namespace {

Settings parse(const SourceText& source, const fs::path& dir) {
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

}  // namespace

Expected<Settings> load_settings(const fs::path& file) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return Settings{};
  KILN_TRY(std::string text, read_file(file, 1 << 20));
  try {
    return parse(SourceText{file.string(), text}, file.parent_path());
  } catch (const KilnError& e) {
    return e.error();
  }
}

}  // namespace kiln::manifest
