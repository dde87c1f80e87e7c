// The Debian archive this machine's apt uses, for toolkits of pinned Debian packages (their pool
// paths are pinned, never a host name): $KILN_DEBIAN_MIRROR, else the first http(s) URI of a
// Debian archive (a `deb` entry whose URI's path ends in /debian) in <apt>/sources.list, then
// <apt>/sources.list.d/*.list (one-line style) and *.sources (deb822), files in name order.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::fetch {

// The mirror's base URL without a trailing '/' ("http://deb.debian.org/debian").
Expected<std::string> debian_mirror(const std::filesystem::path& apt_dir = "/etc/apt");

// The URIs of the `deb` lines of a one-line-style sources.list, in order (deb-src, comments and
// [options] skipped).
std::vector<std::string> one_line_deb_uris(std::string_view text);
// The URIs of the deb822 stanzas of a .sources file whose Types include deb (not Enabled: no).
std::vector<std::string> deb822_deb_uris(std::string_view text);
// An http(s) URI whose path's last component is "debian" (not debian-security, not a ports or
// third-party archive).
bool is_debian_archive_uri(std::string_view uri);

}  // namespace kiln::fetch
