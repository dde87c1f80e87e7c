#include "fetch/index_config.h"

#include <cstdlib>

#include "core/fs.h"
#include "core/strings.h"
#include "fetch/ini.h"
#include "fetch/url.h"

namespace kiln::fetch {

namespace {

// pip's option-name normalisation: "INDEX_URL" and "--index-url" read as "index-url".
std::string normalize_key(std::string_view key) {
  std::string k = lower(key);
  for (char& c : k)
    if (c == '_') c = '-';
  if (k.rfind("--", 0) == 0) k = k.substr(2);
  return k;
}

Expected<IndexSetting> checked(std::string url, std::string origin) {
  url = std::string(trim(url));
  if (!is_http_url(url))
    return Error::bad_input(cat("index URL '", redact_url(url), "' (from ", origin,
                                ") must start with http:// or https://"));
  if (url.back() != '/') url += '/';
  return IndexSetting{std::move(url), std::move(origin)};
}

}  // namespace

std::vector<fs::path> pip_config_files() {
  std::string config_file = env_value("PIP_CONFIG_FILE");
  if (config_file == "/dev/null") return {};
  std::vector<fs::path> files;
  std::string xdg_dirs = env_value("XDG_CONFIG_DIRS");
  if (xdg_dirs.empty()) xdg_dirs = "/etc/xdg";
  for (const auto& dir : split(xdg_dirs, ":")) files.push_back(fs::path(dir) / "pip" / "pip.conf");
  files.push_back("/etc/pip.conf");
  std::error_code ec;
  bool user_files = config_file.empty() || !fs::exists(config_file, ec);
  std::string home = env_value("HOME");
  if (user_files && !home.empty()) {
    files.push_back(fs::path(home) / ".pip" / "pip.conf");
    std::string xdg_home = env_value("XDG_CONFIG_HOME");
    files.push_back((xdg_home.empty() ? fs::path(home) / ".config" : fs::path(xdg_home)) / "pip" /
                    "pip.conf");
  }
  std::string venv = env_value("VIRTUAL_ENV");
  if (!venv.empty()) files.push_back(fs::path(venv) / "pip.conf");
  if (!config_file.empty()) files.push_back(config_file);
  return files;
}

Expected<IndexSetting> configured_index(const std::string& explicit_url) {
  if (!trim(explicit_url).empty()) return checked(explicit_url, "--index-url");
  for (const char* name : {"PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"}) {
    std::string from_env = env_value(name);
    if (!trim(from_env).empty()) return checked(from_env, cat("$", name));
  }

  // pip merges the files key by key ("global.index-url", "install.index-url"), later files
  // winning, then lets the command's section override [global].
  std::string global_url, global_origin, install_url, install_origin;
  for (const auto& file : pip_config_files()) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) continue;
    KILN_TRY(std::string text, read_file(file));
    KILN_TRY(std::vector<IniEntry> entries, parse_ini(text, file.string()));
    for (const auto& e : entries) {
      if (normalize_key(e.key) != "index-url") continue;
      if (e.section == "global") {
        global_url = e.value;
        global_origin = cat(file.string(), ":", e.line, " [global]");
      } else if (e.section == "install") {
        install_url = e.value;
        install_origin = cat(file.string(), ":", e.line, " [install]");
      }
    }
  }
  if (!install_url.empty()) return checked(install_url, install_origin);
  if (!global_url.empty()) return checked(global_url, global_origin);
  return IndexSetting{kDefaultIndexUrl, "default"};
}

}  // namespace kiln::fetch
