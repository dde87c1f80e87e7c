#include "fetch/url.h"

#include <cctype>
#include <vector>

#include "core/strings.h"

namespace kiln::fetch {

namespace {

struct Parts {
  std::string scheme;  // without ':'
  bool has_authority = false;
  std::string authority;
  std::string path;
  bool has_query = false;
  std::string query;
  bool has_fragment = false;
  std::string fragment;
};

bool is_scheme(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.')
      return false;
  return true;
}

// RFC 3986 appendix B, by hand.
Parts parse(std::string_view url) {
  Parts p;
  std::size_t hash = url.find('#');
  if (hash != std::string_view::npos) {
    p.has_fragment = true;
    p.fragment = std::string(url.substr(hash + 1));
    url = url.substr(0, hash);
  }
  std::size_t q = url.find('?');
  if (q != std::string_view::npos) {
    p.has_query = true;
    p.query = std::string(url.substr(q + 1));
    url = url.substr(0, q);
  }
  std::size_t colon = url.find(':');
  if (colon != std::string_view::npos && url.find('/') > colon && is_scheme(url.substr(0, colon))) {
    p.scheme = std::string(url.substr(0, colon));
    url = url.substr(colon + 1);
  }
  if (url.substr(0, 2) == "//") {
    p.has_authority = true;
    std::size_t slash = url.find('/', 2);
    if (slash == std::string_view::npos) slash = url.size();
    p.authority = std::string(url.substr(2, slash - 2));
    url = url.substr(slash);
  }
  p.path = std::string(url);
  return p;
}

std::string compose(const Parts& p) {
  std::string out;
  if (!p.scheme.empty()) out += p.scheme + ":";
  if (p.has_authority) out += "//" + p.authority;
  out += p.path;
  if (p.has_query) out += "?" + p.query;
  if (p.has_fragment) out += "#" + p.fragment;
  return out;
}

// RFC 3986 section 5.2.4.
std::string remove_dot_segments(std::string_view path) {
  std::vector<std::string> out;
  bool absolute = !path.empty() && path[0] == '/';
  auto segments = split(path, "/", /*skip_empty=*/false);
  if (absolute) segments.erase(segments.begin());
  bool trailing_slash = false;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const std::string& s = segments[i];
    bool last = i + 1 == segments.size();
    if (s == ".") {
      trailing_slash = last;
    } else if (s == "..") {
      if (!out.empty()) out.pop_back();
      trailing_slash = last;
    } else {
      out.push_back(s);
      trailing_slash = false;
    }
  }
  std::string result = absolute ? "/" : "";
  result += join(out, "/");
  if (trailing_slash && !out.empty()) result += "/";
  return result;
}

std::string merge_paths(const Parts& base, std::string_view ref_path) {
  if (base.has_authority && base.path.empty()) return cat("/", ref_path);
  std::size_t slash = base.path.rfind('/');
  if (slash == std::string::npos) return std::string(ref_path);
  return cat(base.path.substr(0, slash + 1), ref_path);
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

bool is_http_url(std::string_view url) {
  std::string l = lower(url.substr(0, 8));
  return l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0;
}

bool is_file_url(std::string_view url) {
  return lower(url.substr(0, 7)) == "file://";
}

std::string resolve_url(std::string_view base_url, std::string_view reference) {
  Parts r = parse(reference);
  Parts base = parse(base_url);
  Parts t;
  if (!r.scheme.empty()) {
    t = r;
    t.path = remove_dot_segments(r.path);
  } else {
    t.scheme = base.scheme;
    if (r.has_authority) {
      t.has_authority = true;
      t.authority = r.authority;
      t.path = remove_dot_segments(r.path);
      t.has_query = r.has_query;
      t.query = r.query;
    } else {
      t.has_authority = base.has_authority;
      t.authority = base.authority;
      if (r.path.empty()) {
        t.path = base.path;
        t.has_query = r.has_query || base.has_query;
        t.query = r.has_query ? r.query : base.query;
      } else {
        t.path = r.path[0] == '/' ? remove_dot_segments(r.path)
                                  : remove_dot_segments(merge_paths(base, r.path));
        t.has_query = r.has_query;
        t.query = r.query;
      }
    }
    t.has_fragment = r.has_fragment;
    t.fragment = r.fragment;
  }
  return compose(t);
}

std::string strip_fragment(std::string_view url) {
  return std::string(url.substr(0, url.find('#')));
}

std::string fragment(std::string_view url) {
  std::size_t hash = url.find('#');
  return hash == std::string_view::npos ? std::string() : std::string(url.substr(hash + 1));
}

std::string percent_decode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      int hi = hex_value(text[i + 1]), lo = hex_value(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

std::string url_filename(std::string_view url) {
  Parts p = parse(url);
  std::size_t slash = p.path.rfind('/');
  std::string last = slash == std::string::npos ? p.path : p.path.substr(slash + 1);
  return percent_decode(last);
}

std::string file_url_path(std::string_view url) {
  if (!is_file_url(url)) return {};
  Parts p = parse(url);
  // file:///path and file://localhost/path name local files; other hosts do not.
  if (!p.authority.empty() && lower(p.authority) != "localhost") return {};
  if (p.path.empty() || p.path[0] != '/') return {};
  return percent_decode(p.path);
}

std::string redact_url(std::string_view url) {
  Parts p = parse(url);
  if (!p.has_authority) return std::string(url);
  std::size_t at = p.authority.rfind('@');
  if (at == std::string::npos) return std::string(url);
  std::string userinfo = p.authority.substr(0, at);
  std::size_t colon = userinfo.find(':');
  if (colon == std::string::npos) return std::string(url);
  p.authority = cat(userinfo.substr(0, colon), ":***", p.authority.substr(at));
  return compose(p);
}

std::string without_userinfo(std::string_view url) {
  Parts p = parse(url);
  if (!p.has_authority) return std::string(url);
  std::size_t at = p.authority.rfind('@');
  if (at == std::string::npos) return std::string(url);
  p.authority = p.authority.substr(at + 1);
  return compose(p);
}

bool is_local_git_url(std::string_view url) {
  if (url.find("::") != std::string_view::npos && url.find("://") == std::string_view::npos)
    return true;  // a remote helper's "<transport>::<address>" (ext:: runs a command)
  if (auto scheme = url.find("://"); scheme != std::string_view::npos) {
    std::string s = lower(url.substr(0, scheme));
    return !(s == "http" || s == "https" || s == "git" || s == "ssh" || s == "git+ssh" ||
             s == "ssh+git");
  }
  // scp-like: a ':' before any '/', after at least one character
  std::size_t colon = url.find(':'), slash = url.find('/');
  return !(colon != std::string_view::npos && colon > 0 &&
           (slash == std::string_view::npos || colon < slash));
}

bool is_safe_filename(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255) return false;
  for (char c : name)
    if (c == '/' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

Expected<std::string> git_fetch_url(std::string_view spec, std::string_view url) {
  std::string_view best_prefix;
  std::string_view best_replacement;
  std::vector<std::string> rules = split(spec, " \t\r\n");
  for (std::string_view rule : rules) {
    std::size_t eq = rule.find('=');
    if (eq == 0 || eq == std::string_view::npos || eq + 1 == rule.size())
      return Error::bad_input(
          cat("$KILN_GIT_MIRRORS: '", printable_excerpt(rule, 80), "' is not PREFIX=REPLACEMENT"));
    std::string_view prefix = rule.substr(0, eq);
    if (url.substr(0, prefix.size()) == prefix && prefix.size() > best_prefix.size()) {
      best_prefix = prefix;
      best_replacement = rule.substr(eq + 1);
    }
  }
  if (best_prefix.empty()) return std::string(url);
  return cat(best_replacement, url.substr(best_prefix.size()));
}

}  // namespace kiln::fetch
