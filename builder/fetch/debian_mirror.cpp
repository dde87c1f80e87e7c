#include "fetch/debian_mirror.h"

#include <algorithm>
#include <cstdlib>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::fetch {

namespace fs = std::filesystem;

namespace {

constexpr std::uint64_t kMaxSourcesFile = 1u << 20;
constexpr std::size_t kMaxSourcesFiles = 256;

std::string_view without_comment(std::string_view line) {
  std::size_t hash = line.find('#');
  return trim(hash == std::string_view::npos ? line : line.substr(0, hash));
}

std::string without_slash(std::string uri) {
  while (!uri.empty() && uri.back() == '/') uri.pop_back();
  return uri;
}

}  // namespace

bool is_debian_archive_uri(std::string_view uri) {
  std::string_view rest;
  if (uri.starts_with("http://"))
    rest = uri.substr(7);
  else if (uri.starts_with("https://"))
    rest = uri.substr(8);
  else
    return false;
  if (uri.size() > 2048) return false;
  for (char c : uri)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '"' || c == '\\') return false;
  std::size_t slash = rest.find('/');
  if (slash == 0 || slash == std::string_view::npos) return false;
  auto parts = split(rest.substr(slash), "/");
  return !parts.empty() && parts.back() == "debian";
}

std::vector<std::string> one_line_deb_uris(std::string_view text) {
  std::vector<std::string> out;
  for (const auto& raw : split(text, "\n")) {
    std::string_view line = without_comment(raw);
    auto words = split(line, " \t");
    if (words.empty() || words[0] != "deb") continue;
    std::size_t i = 1;
    if (i < words.size() && words[i].starts_with('[')) {  // [ options ], spaces allowed
      while (i < words.size() && !words[i].ends_with(']')) ++i;
      ++i;
    }
    if (i < words.size()) out.push_back(words[i]);
  }
  return out;
}

std::vector<std::string> deb822_deb_uris(std::string_view text) {
  std::vector<std::string> out;
  std::string* last = nullptr;  // the field a continuation line extends
  std::string types_text, uris_text, enabled_text;
  auto flush = [&] {
    auto t = split(types_text, " \t");
    if (lower(trim(enabled_text)) != "no" && std::find(t.begin(), t.end(), "deb") != t.end())
      for (auto& u : split(uris_text, " \t")) out.push_back(u);
    types_text.clear();
    uris_text.clear();
    enabled_text.clear();
    last = nullptr;
  };
  for (const auto& raw : split(text, "\n", /*skip_empty=*/false)) {
    std::string_view line = raw;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with('#')) continue;
    if (trim(line).empty()) {
      flush();
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      if (last) *last += cat(" ", without_comment(line));
      continue;
    }
    std::size_t colon = line.find(':');
    last = nullptr;
    if (colon == std::string_view::npos) continue;
    std::string field = lower(trim(line.substr(0, colon)));
    std::string value(trim(line.substr(colon + 1)));
    if (field == "types") last = &types_text;
    if (field == "uris") last = &uris_text;
    if (field == "enabled") last = &enabled_text;
    if (last) *last = value;
  }
  flush();
  return out;
}

Expected<std::string> debian_mirror(const fs::path& apt_dir) {
  if (const char* env = std::getenv("KILN_DEBIAN_MIRROR"); env && *env) {
    if (!is_debian_archive_uri(env) && !std::string_view(env).starts_with("file://") &&
        !std::string_view(env).starts_with("http"))
      return Error::bad_input(cat("KILN_DEBIAN_MIRROR='", env,
                                  "' is no http(s):// or file:// URL of a Debian archive"));
    return without_slash(env);
  }
  std::vector<fs::path> files = {apt_dir / "sources.list"};
  std::vector<fs::path> more;
  std::error_code ec;
  for (auto it = fs::directory_iterator(apt_dir / "sources.list.d", ec);
       !ec && it != fs::directory_iterator() && more.size() < kMaxSourcesFiles; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.ends_with(".list") || name.ends_with(".sources")) more.push_back(it->path());
  }
  std::sort(more.begin(), more.end());
  files.insert(files.end(), more.begin(), more.end());
  for (const auto& f : files) {
    auto text = read_file(f, kMaxSourcesFile);
    if (!text) continue;
    auto uris = f.extension() == ".sources" ? deb822_deb_uris(*text) : one_line_deb_uris(*text);
    for (const auto& u : uris)
      if (is_debian_archive_uri(u)) return without_slash(u);
  }
  return Error::failed(cat("no Debian archive in apt's sources (",
                           (apt_dir / "sources.list").string(), ", ",
                           (apt_dir / "sources.list.d").string(),
                           "): a toolkit of Debian packages needs one; set KILN_DEBIAN_MIRROR to "
                           "its URL (e.g. http://deb.debian.org/debian)"));
}

}  // namespace kiln::fetch
