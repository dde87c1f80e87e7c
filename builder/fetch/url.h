// URL helpers for fetching: RFC 3986 reference resolution, fragments, file names, redaction.
#pragma once

#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln::fetch {

bool is_http_url(std::string_view url);  // http:// or https:// (case-insensitive scheme)
bool is_file_url(std::string_view url);  // file://

// `reference` resolved against `base` (RFC 3986 section 5.2): absolute references are returned
// as they are, "//host/x", "/x", "x", "../x", "?q" and "#f" are joined to the base.
std::string resolve_url(std::string_view base, std::string_view reference);

std::string strip_fragment(std::string_view url);  // "a/b.whl#sha256=..." -> "a/b.whl"
std::string fragment(std::string_view url);        // "a/b.whl#sha256=..." -> "sha256=..."

// %XX escapes decoded ('+' stays '+'); a malformed escape is kept as written.
std::string percent_decode(std::string_view text);

// The last path segment of a URL, percent-decoded, without query and fragment ("" when none).
std::string url_filename(std::string_view url);

// The local path of a file:// URL ("file:///a%20b" -> "/a b"); "" when not a local file URL.
std::string file_url_path(std::string_view url);

// The URL with any password in its user info replaced by "***", for messages and logs.
std::string redact_url(std::string_view url);
// The URL without its user info ("https://user:pw@host/x" -> "https://host/x"): what kiln writes
// where others read it (a manifest's [source] lines).
std::string without_userinfo(std::string_view url);

// A name safe to use as one file name in a directory kiln owns: not empty, not "." or "..", no
// '/', no NUL or other control characters, at most 255 bytes.
bool is_safe_filename(std::string_view name);

// Whether git reaches the repository `url` without a network transport: a path ("/srv/x.git",
// "x", "~/x"), a file:// URL, or a transport that runs a command ("ext::…", "fd::…", any
// "<helper>::…"). http(s)://, git://, ssh:// (git+ssh, ssh+git) and scp-like [user@]host:path are
// remote.
bool is_local_git_url(std::string_view url);

// Where to fetch the git repository `url` from, by the rules of $KILN_GIT_MIRRORS (`spec`):
// PREFIX=REPLACEMENT pairs separated by whitespace; the longest PREFIX that starts `url` is
// replaced by its REPLACEMENT (a URL, a file:// URL or a local path), as git's insteadOf does.
// `url` itself when none matches. The source's pinned commit, not the mirror, vouches for what
// is fetched.
Expected<std::string> git_fetch_url(std::string_view spec, std::string_view url);

}  // namespace kiln::fetch
