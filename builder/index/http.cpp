#include "index/http.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>
#include <optional>

#include "cache/entry.h"
#include "core/hash.h"
#include "core/strings.h"
#include "packaging/name.h"

namespace kiln::index {

namespace {

constexpr const char* kJsonType = "application/vnd.pypi.simple.v1+json";
constexpr const char* kV1HtmlType = "application/vnd.pypi.simple.v1+html";
constexpr const char* kTextHtml = "text/html; charset=utf-8";
constexpr const char* kPageCache = "max-age=0, must-revalidate";

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool istarts_with(std::string_view text, std::string_view prefix) {
  return text.size() >= prefix.size() && iequals(text.substr(0, prefix.size()), prefix);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool parse_u64(std::string_view text, std::uint64_t& out) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "q=0.5" -> 0.5 (in thousandths); false when malformed.
bool parse_qvalue(std::string_view text, int& out) {
  // qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
  if (text.empty() || text.size() > 5 || (text[0] != '0' && text[0] != '1')) return false;
  int whole = text[0] - '0';
  int frac = 0;
  if (text.size() > 1) {
    if (text[1] != '.') return false;
    int scale = 100;
    for (std::size_t i = 2; i < text.size(); ++i, scale /= 10) {
      if (text[i] < '0' || text[i] > '9') return false;
      frac += (text[i] - '0') * scale;
    }
  }
  if (whole == 1 && frac != 0) return false;
  out = whole * 1000 + frac;
  return true;
}

std::string base64_decode(std::string_view text) {
  std::string out;
  int buffer = 0, bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+' || c == '-')
      v = 62;
    else if (c == '/' || c == '_')
      v = 63;
    else if (c == '=')
      break;
    else
      return {};
    buffer = (buffer << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((buffer >> bits) & 0xff);
    }
  }
  return out;
}

bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool authorized(const Request& req, const std::string& token) {
  std::string auth(trim(req.header("Authorization")));
  if (istarts_with(auth, "Bearer "))
    return same_secret(trim(std::string_view(auth).substr(7)), token);
  if (istarts_with(auth, "Basic ")) {
    std::string creds = base64_decode(trim(std::string_view(auth).substr(6)));
    auto colon = creds.find(':');
    if (colon == std::string::npos) return false;
    bool user_ok = same_secret(std::string_view(creds).substr(0, colon), token);
    bool pass_ok = same_secret(std::string_view(creds).substr(colon + 1), token);
    return user_ok || pass_ok;  // http://token@host/ (uv) or http://user:token@host/
  }
  return false;
}

std::string http_date(std::int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!::gmtime_r(&t, &tm)) return {};
  static const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday],
                tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return buf;
}

// If-None-Match: "*" or a list of entity tags, compared weakly (RFC 9110 13.1.2).
bool none_match(std::string_view header, std::string_view etag) {
  if (trim(header) == "*") return true;
  auto strip_weak = [](std::string_view t) {
    t = trim(t);
    if (t.size() >= 2 && (t[0] == 'W' || t[0] == 'w') && t[1] == '/') t.remove_prefix(2);
    return t;
  };
  for (const auto& part : split(header, ","))
    if (strip_weak(part) == strip_weak(etag)) return true;
  return false;
}

Response text(int status, std::string body) {
  Response r;
  r.status = status;
  r.headers = {{"Content-Type", "text/plain; charset=utf-8"},
               {"X-Content-Type-Options", "nosniff"}};
  r.body = std::move(body);
  r.body += '\n';
  return r;
}

Response not_found() {
  return text(404, "404 not found");
}

// "/simple/…" without a target of that name: where pip users look first. kiln serves one index per
// target, so the answer (still a 404: no client takes it for a project list) names them.
Response no_such_index(const IndexModel& model) {
  std::string body =
      "404 not found: kiln serves one index per target; give one of these as the "
      "index URL (--index-url):";
  for (const auto& [name, t] : model.targets) body += cat("\n/", percent_encode(name), "/simple/");
  if (model.targets.empty()) body += "\n(none yet: the cache holds no wheels)";
  return text(404, std::move(body));
}

std::string join_path(const std::vector<std::string>& segments, bool trailing_slash) {
  std::string out;
  for (const auto& s : segments) out += cat("/", percent_encode(s));
  if (trailing_slash || out.empty()) out += '/';
  return out;
}

Response redirect(const std::vector<std::string>& segments, bool trailing_slash) {
  std::string location = join_path(segments, trailing_slash);
  Response r = text(301, cat("301 moved permanently: ", location));
  r.headers.emplace_back("Location", location);
  return r;
}

Response page(const Request& req, const std::string& html, const std::string& html_etag,
              const std::string& json, const std::string& json_etag) {
  std::string accept;
  for (const auto& [k, v] : req.headers)
    if (iequals(k, "Accept")) accept += accept.empty() ? v : cat(", ", v);
  auto neg = negotiate(accept);
  if (!neg) {
    Response r = text(406, cat("406 not acceptable: this index serves ", kJsonType, ", ",
                               kV1HtmlType, " and text/html"));
    r.headers.emplace_back("Vary", "Accept");
    return r;
  }
  bool is_json = neg->format == Format::Json;
  const std::string& etag = is_json ? json_etag : html_etag;
  Response r;
  r.headers = {{"Content-Type", neg->content_type},
               {"ETag", etag},
               {"Vary", "Accept"},
               {"Cache-Control", kPageCache},
               {"X-Content-Type-Options", "nosniff"}};
  if (req.has_header("If-None-Match") && none_match(req.header("If-None-Match"), etag)) {
    r.status = 304;
    return r;
  }
  r.body = is_json ? json : html;
  return r;
}

// A wheel or its metadata: conditional and range requests on `size` bytes.
Response representation(const Request& req, std::string content_type, const std::string& etag,
                        std::int64_t mtime, std::uint64_t size, ByteRange& range, bool& partial) {
  partial = false;
  Response r;
  r.headers = {{"Content-Type", std::move(content_type)},
               {"ETag", etag},
               {"Accept-Ranges", "bytes"},
               {"Last-Modified", http_date(mtime)},
               {"Cache-Control", kPageCache},
               {"X-Content-Type-Options", "nosniff"}};
  if (req.has_header("If-None-Match") && none_match(req.header("If-None-Match"), etag)) {
    r.status = 304;
    return r;
  }
  std::string if_range(trim(req.header("If-Range")));
  bool range_allowed = if_range.empty() || if_range == etag;  // a date or another tag: whole file
  if (req.has_header("Range") && range_allowed) {
    switch (parse_range(req.header("Range"), size, range)) {
      case RangeResult::Full:
        break;
      case RangeResult::Partial:
        r.status = 206;
        partial = true;
        r.headers.emplace_back("Content-Range",
                               cat("bytes ", range.first, "-", range.last, "/", size));
        return r;
      case RangeResult::Unsatisfiable: {
        Response u = text(416, "416 range not satisfiable");
        u.headers.emplace_back("Content-Range", cat("bytes */", size));
        return u;
      }
    }
  }
  range = {0, size ? size - 1 : 0};
  return r;
}

// A text the model holds beside a wheel (its METADATA, its attestation).
Response serve_text(const Request& req, const File& f, const std::string& body,
                    const std::string& sha256, std::string content_type) {
  ByteRange range;
  bool partial = false;
  Response r = representation(req, std::move(content_type), cat('"', sha256, '"'), f.committed_at,
                              body.size(), range, partial);
  if (r.status == 200 || r.status == 206)
    r.body = partial ? body.substr(range.first, range.last - range.first + 1) : body;
  return r;
}

Response serve_wheel(const Request& req, const File& f) {
  ByteRange range;
  bool partial = false;
  Response r = representation(req, "application/octet-stream", cat('"', f.sha256, '"'),
                              f.committed_at, f.size, range, partial);
  if (r.status == 200 || r.status == 206) {
    FileSlice slice;
    slice.dir = f.dir;
    slice.filename = f.filename;
    slice.file_size = f.size;
    slice.sha256 = f.sha256;
    slice.offset = partial ? range.first : 0;
    slice.length = partial ? range.last - range.first + 1 : f.size;
    r.file = std::move(slice);
  }
  return r;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

bool Request::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return iequals(h.first, name); });
}

std::string Response::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequals(k, name)) return v;
  return {};
}

std::optional<Negotiated> negotiate(std::string_view accept) {
  struct Candidate {
    Format format;
    const char* content_type;
    std::vector<std::string_view> names;  // full types that name it exactly
    std::string_view type;                // for "type/*"
  };
  static const Candidate candidates[] = {
      {Format::Json,
       kJsonType,
       {"application/vnd.pypi.simple.v1+json", "application/vnd.pypi.simple.latest+json"},
       "application"},
      {Format::Html,
       kV1HtmlType,
       {"application/vnd.pypi.simple.v1+html", "application/vnd.pypi.simple.latest+html"},
       "application"},
      {Format::Html, kTextHtml, {"text/html"}, "text"},
  };
  if (trim(accept).empty()) return Negotiated{Format::Html, kTextHtml};

  struct Range {
    std::string type, subtype;
    int q = 1000;
  };
  std::vector<Range> ranges;
  for (const auto& item : split(accept, ",")) {
    auto params = split(item, ";", /*skip_empty=*/false);
    std::string media = lower(trim(params[0]));
    if (media == "*") media = "*/*";
    auto slash = media.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == media.size()) continue;
    Range r{media.substr(0, slash), media.substr(slash + 1)};
    if (r.type == "*" && r.subtype != "*") continue;
    bool ok = true;
    for (std::size_t i = 1; i < params.size(); ++i) {
      std::string_view p = trim(params[i]);
      auto eq = p.find('=');
      if (eq == std::string_view::npos) continue;
      if (iequals(trim(p.substr(0, eq)), "q")) ok = parse_qvalue(trim(p.substr(eq + 1)), r.q);
    }
    if (ok) ranges.push_back(std::move(r));
  }

  int best = -1, best_q = 0, best_spec = 0, best_rank = 0;
  for (int i = 0; i < 3; ++i) {
    const Candidate& c = candidates[i];
    int spec = 0, q = 0;
    for (const auto& r : ranges) {
      int s = 0;
      std::string full = cat(r.type, "/", r.subtype);
      if (std::find(c.names.begin(), c.names.end(), full) != c.names.end())
        s = 3;
      else if (r.subtype == "*" && r.type == c.type)
        s = 2;
      else if (r.type == "*")
        s = 1;
      if (s == 0) continue;
      if (s > spec || (s == spec && r.q > q)) {
        spec = s;
        q = r.q;
      }
    }
    if (spec == 0 || q == 0) continue;
    // Named exactly: JSON first. Reached by a wildcard only: text/html first (browsers, curl).
    int rank = spec == 3 ? 10 - i : i;
    if (q > best_q ||
        (q == best_q && (spec > best_spec || (spec == best_spec && rank > best_rank)))) {
      best = i;
      best_q = q;
      best_spec = spec;
      best_rank = rank;
    }
  }
  if (best < 0) return std::nullopt;
  return Negotiated{candidates[best].format, candidates[best].content_type};
}

RangeResult parse_range(std::string_view header, std::uint64_t size, ByteRange& out) {
  std::string_view h = trim(header);
  if (!istarts_with(h, "bytes=")) return RangeResult::Full;
  h = trim(h.substr(6));
  if (h.find(',') != std::string_view::npos) return RangeResult::Full;
  auto dash = h.find('-');
  if (dash == std::string_view::npos) return RangeResult::Full;
  std::string_view a = trim(h.substr(0, dash)), b = trim(h.substr(dash + 1));
  std::uint64_t first = 0, last = 0;
  if (a.empty()) {  // suffix: the last n bytes
    if (!parse_u64(b, last)) return RangeResult::Full;
    if (last == 0 || size == 0) return RangeResult::Unsatisfiable;
    out = {size - std::min(last, size), size - 1};
    return RangeResult::Partial;
  }
  if (!parse_u64(a, first)) return RangeResult::Full;
  if (b.empty()) {
    last = size ? size - 1 : 0;
  } else {
    if (!parse_u64(b, last) || last < first) return RangeResult::Full;
    if (size) last = std::min(last, size - 1);
  }
  if (first >= size) return RangeResult::Unsatisfiable;
  out = {first, last};
  return RangeResult::Partial;
}

std::optional<std::vector<std::string>> split_path(std::string_view path, bool& trailing_slash) {
  trailing_slash = false;
  if (path.empty() || path[0] != '/') return std::nullopt;
  auto raw = split(path.substr(1), "/", /*skip_empty=*/false);
  if (!raw.empty() && raw.back().empty()) {
    trailing_slash = true;
    raw.pop_back();
  }
  if (path == "/") trailing_slash = true;
  std::vector<std::string> out;
  for (const auto& seg : raw) {
    if (seg.empty()) return std::nullopt;
    std::string decoded;
    for (std::size_t i = 0; i < seg.size(); ++i) {
      if (seg[i] != '%') {
        decoded += seg[i];
        continue;
      }
      if (i + 2 >= seg.size()) return std::nullopt;
      int hi = hex_value(seg[i + 1]), lo = hex_value(seg[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      decoded += static_cast<char>(hi * 16 + lo);
      i += 2;
    }
    if (decoded == "." || decoded == "..") return std::nullopt;
    for (char c : decoded)
      if (c == '/' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        return std::nullopt;
    out.push_back(std::move(decoded));
  }
  return out;
}

StaticFile make_static_file(std::string content_type, std::string body) {
  StaticFile f{std::move(content_type), std::move(body), ""};
  f.etag = cat('"', sha256_hex(f.body), '"');
  return f;
}

namespace {

bool is_own(std::string_view name, const IndexModel& model, const Routes& routes) {
  if (routes.own.contains(name)) return true;
  for (const auto& [t, target] : model.targets)
    if (target.projects.contains(name)) return true;
  return false;
}

// A name that is not kiln's goes upstream: a 404 would end pip's search, and kiln never proxies.
// 307, not 301/308: pip's HTTP cache would keep a permanent redirect; no-store keeps it out.
Response upstream(std::string_view target, const std::string& name, const Routes& routes) {
  std::string location = routes.upstream_page(target, name);
  if (location.empty()) return not_found();
  Response r = text(307, cat("307 temporary redirect: ", location));
  r.headers.emplace_back("Location", location);
  r.headers.emplace_back("Cache-Control", "no-store");
  return r;
}

Response serve_static(const Request& req, const StaticFile& f) {
  Response r;
  r.headers = {{"Content-Type", f.content_type},
               {"ETag", f.etag},
               {"Cache-Control", kPageCache},
               {"X-Content-Type-Options", "nosniff"}};
  if (req.has_header("If-None-Match") && none_match(req.header("If-None-Match"), f.etag))
    r.status = 304;
  else
    r.body = f.body;
  return r;
}

// "/": the list of targets, as HTML (what it always was, and what anything but a PEP 691 JSON
// request gets) or as JSON (targets_json: what `kiln doctor --server` reads).
Response root(const Request& req, const IndexModel& model, const Routes& routes) {
  std::string accept;
  for (const auto& [k, v] : req.headers)
    if (iequals(k, "Accept")) accept += accept.empty() ? v : cat(", ", v);
  auto neg = negotiate(accept);
  bool is_json = neg && neg->format == Format::Json;
  std::string json = is_json ? targets_json(model, routes.declared) : std::string();
  std::string etag = is_json ? cat('"', sha256_hex(json).substr(0, 32), '"') : model.root_etag;
  Response r;
  r.headers = {{"Content-Type", is_json ? kJsonType : kTextHtml},
               {"ETag", etag},
               {"Vary", "Accept"},
               {"Cache-Control", kPageCache},
               {"X-Content-Type-Options", "nosniff"}};
  if (req.has_header("If-None-Match") && none_match(req.header("If-None-Match"), etag))
    r.status = 304;
  else
    r.body = is_json ? std::move(json) : model.root_html;
  return r;
}

}  // namespace

Response handle(const Request& req, const IndexModel& model, const HandlerOptions& options) {
  std::size_t lengths = 0;
  for (const auto& [k, v] : req.headers) lengths += iequals(k, "Content-Length");
  if (lengths > 1) return text(400, "400 bad request: more than one Content-Length");
  if (req.version == "HTTP/1.1" && !req.has_header("Host"))
    return text(400, "400 bad request: HTTP/1.1 without Host");
  if (!options.token.empty() && !authorized(req, options.token)) {
    Response r = text(
        401, "401 unauthorized: send the token as a bearer token or as the password of basic auth");
    r.headers.emplace_back("WWW-Authenticate", "Basic realm=\"kiln\"");
    r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kiln\"");
    return r;
  }
  if (req.method != "GET" && req.method != "HEAD") {
    Response r = text(405, "405 method not allowed: this index is read-only");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  bool slash = false;
  auto parsed = split_path(req.path, slash);
  if (!parsed) return text(400, "400 bad request: malformed path");
  const std::vector<std::string>& seg = *parsed;

  if (seg.empty()) return root(req, model, options.routes);
  if (seg.size() == 1 && !slash)
    if (auto it = options.static_files.find(seg[0]); it != options.static_files.end())
      return serve_static(req, it->second);
  const Target* target = model.target(seg[0]);
  std::optional<Target> known;  // a target of the manifests directory with no wheels yet
  if (!target && options.routes.targets.contains(seg[0]))
    target = &known.emplace(model.known_target(seg[0]));
  if (!target && seg[0] == "simple") return no_such_index(model);
  if (!target || seg.size() > 4) return not_found();
  if (seg.size() == 1) return redirect({seg[0], "simple"}, true);
  if (seg[1] != "simple") return not_found();
  if (seg.size() == 2) {
    if (!slash) return redirect(seg, true);
    return page(req, target->page.html, target->page.html_etag, target->page.json,
                target->page.json_etag);
  }
  std::string project_name = packaging::normalize_name(seg[2]);
  auto pit = target->projects.find(project_name);
  bool here = pit != target->projects.end();
  if (!here && !is_own(project_name, model, options.routes))
    return seg.size() == 3 ? upstream(seg[0], project_name, options.routes) : not_found();
  if (seg[2] != project_name || (seg.size() == 3 && !slash)) {
    std::vector<std::string> to = seg;
    to[2] = project_name;
    return redirect(to, slash || to.size() == 3);
  }
  if (!here) {
    if (seg.size() == 4) return not_found();
    Project empty = empty_project(project_name);  // kiln's name, no files for this target
    return page(req, empty.page.html, empty.page.html_etag, empty.page.json, empty.page.json_etag);
  }
  const Project& project = pit->second;
  if (seg.size() == 3)
    return page(req, project.page.html, project.page.html_etag, project.page.json,
                project.page.json_etag);
  if (slash) return not_found();
  const std::string& name = seg[3];
  if (const File* f = project.find(name)) return serve_wheel(req, *f);
  // The file a suffix names beside a wheel, when the name ends with it.
  auto beside = [&](std::string_view suffix) -> const File* {
    if (name.size() <= suffix.size() || !name.ends_with(suffix)) return nullptr;
    return project.find(std::string_view(name).substr(0, name.size() - suffix.size()));
  };
  if (const File* f = beside(".metadata"))
    return serve_text(req, *f, f->metadata, f->metadata_sha256, "text/plain; charset=utf-8");
  if (const File* f = beside(cache::kAttestationSuffix); f && !f->attestation.empty())
    return serve_text(req, *f, f->attestation, f->attestation_sha256, "application/jsonl");
  return not_found();
}

}  // namespace kiln::index
