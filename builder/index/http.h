// Request handling of `kiln serve` as a pure function of the request and the index model: routing,
// content negotiation, redirects, conditional and range requests, auth. No I/O: files are named
// in the response and opened by the server.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "index/model.h"
#include "index/routes.h"

namespace kiln::index {

struct Request {
  std::string method;   // "GET", "HEAD", …
  std::string version;  // "HTTP/1.1", "HTTP/1.0"; "" when unknown
  std::string path;     // the request target's path as sent (percent-encoded), without the query
  std::vector<std::pair<std::string, std::string>> headers;
  // The first header of that name (case-insensitive), or "".
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

// The body is `body`, or, when `file` is set, `length` bytes at `offset` of a wheel in the cache.
struct FileSlice {
  std::filesystem::path dir;  // the entry directory
  std::string filename;
  std::uint64_t file_size = 0;  // the size the file must have
  std::string sha256;           // the hash its bytes must have (the response's ETag)
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>>
      headers;  // never Content-Length (the server adds it)
  std::string body;
  std::optional<FileSlice> file;
  std::string header(std::string_view name) const;
  std::uint64_t content_length() const { return file ? file->length : body.size(); }
};

// A file the index serves at /<name> besides the targets (e.g. /doctor.py, the text `kiln serve`
// gets from the CLI): one path segment, never a target's pages, which live under /<target>/.
struct StaticFile {
  std::string content_type;
  std::string body;
  std::string etag;  // "\"<sha256 of body>\"": make_static_file sets it
};
StaticFile make_static_file(std::string content_type, std::string body);

struct HandlerOptions {
  // By name ("doctor.py"): served at /<name>, without a trailing slash.
  std::map<std::string, StaticFile> static_files;
  // When not empty, every request needs `Authorization: Bearer <token>` or Basic auth with the
  // token as the password (any user name), as pip and uv send for http://user:token@host/.
  std::string token;
  // Who answers for a project name (kiln, an upstream, nobody) and the targets known without
  // wheels.
  Routes routes;
};

// A project page kiln has no files for: kiln's own name (`routes.own`, or a project of another
// target) gets an empty page, any other name a 307 to its upstream (`Cache-Control: no-store`: no
// client keeps it), or 404 without one. Targets of `routes.targets` without wheels are served
// empty. HEAD gets the same response as GET; the server sends its headers only. A request with more
// than one Content-Length, or an HTTP/1.1 request without Host, is 400 (RFC 9112).
Response handle(const Request& request, const IndexModel& model,
                const HandlerOptions& options = {});

// --- parts of handle(), exposed for tests -------------------------------------------------------

enum class Format { Html, Json };
struct Negotiated {
  Format format = Format::Html;
  std::string content_type;
};
// PEP 691 negotiation on an Accept header: application/vnd.pypi.simple.v1+json (or latest+json),
// application/vnd.pypi.simple.v1+html (or latest+html), text/html; wildcards and q-values per RFC
// 9110 (the most specific range decides a type's q; q=0 refuses it). Ties go to the type named
// exactly, then JSON before HTML; a bare wildcard gets text/html. An empty header is text/html.
// nullopt: nothing acceptable (406).
std::optional<Negotiated> negotiate(std::string_view accept);

// A single "bytes=" range of a representation of `size` bytes, as [first, last].
struct ByteRange {
  std::uint64_t first = 0, last = 0;
};
enum class RangeResult { Full, Partial, Unsatisfiable };
// Full for no header, a malformed one, or several ranges (RFC 9110 lets a server ignore those).
RangeResult parse_range(std::string_view header, std::uint64_t size, ByteRange& out);

// Splits a request path into percent-decoded segments. Fails (nullopt) on a path not starting
// with '/', malformed or NUL escapes, a segment that decodes to "." or ".." or contains '/', '\\'
// or a control character, or an empty segment other than the trailing one. `trailing_slash` is
// set when the path ends with '/' (the root path "/" has no segments and a trailing slash).
std::optional<std::vector<std::string>> split_path(std::string_view path, bool& trailing_slash);

}  // namespace kiln::index
