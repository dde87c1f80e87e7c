#include "fetch/simple_index.h"

#include <cctype>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/json.h"
#include "core/strings.h"
#include "fetch/url.h"

namespace kiln::fetch {

namespace {

std::string hash_from_fragment(std::string_view url) {
  std::string f = fragment(url);
  if (f.rfind("sha256=", 0) != 0) return {};
  return lower(f.substr(7));
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// The character references an index page uses; unknown ones stay as written.
std::string decode_entities(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    std::size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 10) {
      out += s[i];
      continue;
    }
    std::string_view name = s.substr(i + 1, semi - i - 1);
    if (name == "amp")
      out += '&';
    else if (name == "lt")
      out += '<';
    else if (name == "gt")
      out += '>';
    else if (name == "quot")
      out += '"';
    else if (name == "apos")
      out += '\'';
    else if (name.size() > 1 && name[0] == '#') {
      bool hex = name[1] == 'x' || name[1] == 'X';
      std::string_view digits = name.substr(hex ? 2 : 1);
      unsigned long cp = 0;
      bool ok = !digits.empty();
      for (char c : digits) {
        int v = (c >= '0' && c <= '9')          ? c - '0'
                : hex && (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : hex && (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                : -1;
        if (v < 0 || cp > 0x10FFFF) {
          ok = false;
          break;
        }
        cp = cp * (hex ? 16 : 10) + static_cast<unsigned long>(v);
      }
      if (!ok) {
        out += s[i];
        continue;
      }
      append_utf8(out, cp);
    } else {
      out += s[i];
      continue;
    }
    i = semi;
  }
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

// Case-insensitive search for `needle` (lowercase) in `hay` from `from`.
std::size_t find_ci(std::string_view hay, std::string_view needle, std::size_t from) {
  if (needle.size() > hay.size()) return std::string_view::npos;
  for (std::size_t i = from; i + needle.size() <= hay.size(); ++i) {
    bool match = true;
    for (std::size_t j = 0; j < needle.size() && match; ++j)
      match = static_cast<char>(std::tolower(static_cast<unsigned char>(hay[i + j]))) == needle[j];
    if (match) return i;
  }
  return std::string_view::npos;
}

struct Tag {
  std::string name;                                             // lowercase
  std::vector<std::pair<std::string, std::string>> attributes;  // names lowercase, values decoded
  std::size_t end = 0;                                          // index after '>'
};

// Reads the tag starting at html[pos] == '<'.
Tag read_tag(std::string_view html, std::size_t pos) {
  Tag tag;
  std::size_t i = pos + 1;
  while (i < html.size() && !is_space(html[i]) && html[i] != '>' && html[i] != '/')
    tag.name += static_cast<char>(std::tolower(static_cast<unsigned char>(html[i++])));
  while (i < html.size() && html[i] != '>') {
    if (is_space(html[i]) || html[i] == '/') {
      ++i;
      continue;
    }
    std::string name;
    while (i < html.size() && !is_space(html[i]) && html[i] != '=' && html[i] != '>' &&
           html[i] != '/')
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(html[i++])));
    while (i < html.size() && is_space(html[i])) ++i;
    std::string value;
    if (i < html.size() && html[i] == '=') {
      ++i;
      while (i < html.size() && is_space(html[i])) ++i;
      if (i < html.size() && (html[i] == '"' || html[i] == '\'')) {
        char quote = html[i++];
        std::size_t close = html.find(quote, i);
        if (close == std::string_view::npos) close = html.size();
        value = decode_entities(html.substr(i, close - i));
        i = close + 1;
      } else {
        std::size_t start = i;
        while (i < html.size() && !is_space(html[i]) && html[i] != '>') ++i;
        value = decode_entities(html.substr(start, i - start));
      }
    }
    if (!name.empty()) tag.attributes.emplace_back(std::move(name), std::move(value));
  }
  tag.end = i < html.size() ? i + 1 : html.size();
  return tag;
}

const std::string* attribute(const Tag& tag, std::string_view name) {
  for (const auto& [key, value] : tag.attributes)
    if (key == name) return &value;
  return nullptr;
}

// The text of an element, tags removed, entities decoded, trimmed.
std::string element_text(std::string_view inner) {
  std::string text;
  bool in_tag = false;
  for (char c : inner) {
    if (c == '<')
      in_tag = true;
    else if (c == '>')
      in_tag = false;
    else if (!in_tag)
      text += c;
  }
  return std::string(trim(decode_entities(text)));
}

// A link of a page, resolved against `base` (fragment kept for the hash), when it is http(s):
// a page is a stranger's, and its links never make kiln read a local file (file:///etc/passwd,
// file:///proc/kmsg) or speak another scheme. Others are left out and counted.
std::optional<std::string> http_link(std::string_view base, std::string_view reference,
                                     LeftOut* left_out) {
  std::string url = resolve_url(base, reference);
  if (is_http_url(url)) return url;
  if (left_out && left_out->count++ == 0) left_out->first = printable_excerpt(url, 80);
  return std::nullopt;
}

}  // namespace

Expected<std::vector<IndexFile>> parse_json_page(std::string_view text, const std::string& page_url,
                                                 LeftOut* left_out) {
  std::string shown = redact_url(page_url);
  nlohmann::json j = parse_json(text);
  if (j.is_discarded() || !j.is_object())
    return Error::failed(cat("index page ", shown, " is not valid PEP 691 JSON"));
  if (j.contains("meta") && j["meta"].is_object() && j["meta"].contains("api-version")) {
    const auto& version = j["meta"]["api-version"];
    if (!version.is_string() || split(version.get<std::string>(), ".").empty() ||
        split(version.get<std::string>(), ".")[0] != "1")
      return Error::failed(cat("index page ", shown, " uses PEP 691 API version ", version.dump(),
                               "; kiln reads version 1"));
  }
  if (!j.contains("files") || !j["files"].is_array())
    return Error::failed(cat("index page ", shown, " has no 'files' list"));
  std::vector<IndexFile> files;
  std::size_t i = 0;
  for (const auto& f : j["files"]) {
    if (!f.is_object() || !f.contains("filename") || !f["filename"].is_string() ||
        !f.contains("url") || !f["url"].is_string())
      return Error::failed(
          cat("index page ", shown, ": files[", i, "] lacks a 'filename' or 'url' string"));
    ++i;
    std::string url = f["url"].get<std::string>();
    auto resolved = http_link(page_url, url, left_out);
    if (!resolved) continue;
    IndexFile file;
    file.filename = f["filename"].get<std::string>();
    file.url = strip_fragment(*resolved);
    if (f.contains("hashes") && f["hashes"].is_object() && f["hashes"].contains("sha256") &&
        f["hashes"]["sha256"].is_string())
      file.sha256 = lower(f["hashes"]["sha256"].get<std::string>());
    else
      file.sha256 = hash_from_fragment(url);
    if (f.contains("size") && f["size"].is_number_unsigned())
      file.size = f["size"].get<std::uint64_t>();
    for (const char* key : {"core-metadata", "dist-info-metadata"}) {
      if (!f.contains(key)) continue;
      const auto& m = f[key];
      if (m.is_boolean()) file.has_metadata = m.get<bool>();
      if (m.is_object()) {
        file.has_metadata = true;
        if (m.contains("sha256") && m["sha256"].is_string())
          file.metadata_sha256 = lower(m["sha256"].get<std::string>());
      }
      break;
    }
    files.push_back(std::move(file));
  }
  return files;
}

Expected<std::vector<IndexFile>> parse_html_page(std::string_view html, const std::string& page_url,
                                                 LeftOut* left_out) {
  std::vector<IndexFile> files;
  std::string base = page_url;
  std::size_t pos = 0;
  while ((pos = html.find('<', pos)) != std::string_view::npos) {
    if (html.substr(pos, 4) == "<!--") {
      std::size_t end = html.find("-->", pos + 4);
      pos = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    Tag tag = read_tag(html, pos);
    pos = tag.end;
    if (tag.name == "base") {
      if (const std::string* href = attribute(tag, "href")) base = resolve_url(page_url, *href);
      continue;
    }
    if (tag.name != "a") continue;
    const std::string* href = attribute(tag, "href");
    std::size_t close = find_ci(html, "</a", pos);
    std::string_view inner =
        html.substr(pos, close == std::string_view::npos ? html.size() - pos : close - pos);
    if (close != std::string_view::npos) pos = close;
    if (!href || href->empty()) continue;
    auto resolved = http_link(base, *href, left_out);
    if (!resolved) continue;
    IndexFile file;
    const std::string& url = *resolved;
    file.url = strip_fragment(url);
    file.sha256 = hash_from_fragment(url);
    file.filename = element_text(inner);
    if (file.filename.empty()) file.filename = url_filename(file.url);
    const std::string* metadata = attribute(tag, "data-core-metadata");
    if (!metadata) metadata = attribute(tag, "data-dist-info-metadata");
    if (metadata && *metadata != "false") {
      file.has_metadata = true;
      if (metadata->rfind("sha256=", 0) == 0) file.metadata_sha256 = lower(metadata->substr(7));
    }
    files.push_back(std::move(file));
  }
  return files;
}

Expected<std::vector<IndexFile>> parse_project_page(std::string_view text,
                                                    std::string_view content_type,
                                                    const std::string& page_url,
                                                    LeftOut* left_out) {
  std::string type = lower(trim(content_type.substr(0, content_type.find(';'))));
  if (type == kSimpleJsonType) return parse_json_page(text, page_url, left_out);
  if (type == "text/html" || type == "application/vnd.pypi.simple.v1+html")
    return parse_html_page(text, page_url, left_out);
  std::string_view t = trim(text);
  if (!t.empty() && t[0] == '{') return parse_json_page(text, page_url, left_out);
  return parse_html_page(text, page_url, left_out);
}

}  // namespace kiln::fetch
