// Which package index kiln reads, chosen as pip chooses it: an explicit option, $PIP_INDEX_URL (or
// uv's variables), pip's configuration files, else PyPI.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"

namespace kiln::fetch {

inline constexpr const char* kDefaultIndexUrl = "https://pypi.org/simple/";

struct IndexSetting {
  std::string url;     // always ends in '/'
  std::string origin;  // "--index-url", "$PIP_INDEX_URL", "<file> [global]", "default"
};

// pip's configuration files in the order pip applies them, later ones overriding earlier ones:
// $XDG_CONFIG_DIRS/pip/pip.conf (each; default /etc/xdg), /etc/pip.conf, ~/.pip/pip.conf,
// $XDG_CONFIG_HOME/pip/pip.conf (default ~/.config), $VIRTUAL_ENV/pip.conf, $PIP_CONFIG_FILE.
// The two per-user files are skipped when $PIP_CONFIG_FILE names an existing file, and
// PIP_CONFIG_FILE=/dev/null disables every file (pip's rules). Files that do not exist are listed
// too; readers skip them.
std::vector<std::filesystem::path> pip_config_files();

// `explicit_url` (kiln's --index-url) when not empty, else $PIP_INDEX_URL, else uv's
// $UV_DEFAULT_INDEX or $UV_INDEX_URL, else index-url from
// the configuration files ("[install]" over "[global]", as `pip install` reads them; keys match
// pip's spelling rules: index-url, index_url, INDEX-URL), else kDefaultIndexUrl. A malformed
// configuration file or a URL that is not http(s) is an error naming where it came from.
Expected<IndexSetting> configured_index(const std::string& explicit_url = {});

}  // namespace kiln::fetch
