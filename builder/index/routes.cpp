#include "index/routes.h"

#include <algorithm>

#include "core/strings.h"
#include "core/terminal.h"
#include "manifest/target.h"

namespace kiln::index {

bool is_project_name(std::string_view name) {
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  return !name.empty() && name.size() <= 200 && alnum(name.front()) && alnum(name.back()) &&
         std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '-'; });
}

std::string Routes::upstream_page(std::string_view target, std::string_view name) const {
  if (!is_project_name(name)) return "";
  if (auto it = targets.find(target); it != targets.end() && it->second.names.contains(name))
    return it->second.url.empty() ? "" : cat(it->second.url, name, "/");
  if (fallback.empty()) return "";
  return cat(fallback, name, "/");
}

Expected<std::string> check_upstream_url(std::string_view url) {
  auto bad = [&](std::string_view why) {
    return Error::bad_input(cat("upstream index '", terminal_text(url), "': ", why));
  };
  if (!manifest::is_index_url(url))
    return bad("expected an http:// or https:// URL without spaces, quotes or control characters");
  if (url.size() > 2048) return bad("longer than 2048 bytes");
  std::string_view rest = url.substr(url.find("//") + 2);
  std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.empty()) return bad("no host");
  if (authority.find('@') != std::string_view::npos)
    return bad("user info in the URL would be sent to every client; give an index without it");
  if (url.find_first_of("?#") != std::string_view::npos) return bad("a query or fragment");
  std::string out(url);
  if (!out.ends_with('/')) out += '/';
  return out;
}

}  // namespace kiln::index
