#include "wheel/metadata.h"

#include <set>

#include "core/hash.h"
#include "core/strings.h"
#include "manifest/requirement.h"

namespace kiln::wheel {

namespace {

// Header values are one line; continuation would change parsing.
std::string one_line(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

// The extras a requirement's marker names: each `extra == "name"` (either quote; what
// extra\s*==\s*["']([^"']+)["'] found, left to right, one after the other).
void add_extras(std::string_view requirement, std::set<std::string>& extras) {
  for (std::size_t at = requirement.find("extra"); at != std::string_view::npos;
       at = requirement.find("extra", at + 1)) {
    Scanner s(requirement.substr(at + 5));
    s.skip_spaces();
    if (!s.skip("==")) continue;
    s.skip_spaces();
    if (!s.skip('"') && !s.skip('\'')) continue;
    std::string_view name = s.take_while([](char c) { return c != '"' && c != '\''; });
    if (name.empty() || s.done()) continue;
    extras.insert(std::string(name));
    at += 5 + s.pos();  // the closing quote: the next match starts after it
  }
}

}  // namespace

std::string CoreMetadata::render() const {
  std::string out = "Metadata-Version: 2.4\n";
  auto field = [&out](std::string_view header, const std::string& value) {
    if (!value.empty()) out += cat(header, ": ", one_line(value), "\n");
  };
  field("Name", name);
  field("Version", version);
  field("Summary", summary);
  field("Keywords", keywords);
  field("Home-page", home_page);
  field("Author", author);
  field("Author-email", author_email);
  field("Maintainer", maintainer);
  field("Maintainer-email", maintainer_email);
  field("License-Expression", license_expression);
  for (const auto& f : license_files) field("License-File", f);
  for (const auto& c : classifiers) field("Classifier", c);
  for (const auto& u : project_urls) field("Project-URL", u);
  field("Requires-Python", requires_python);
  std::set<std::string> named;
  for (const auto& r : requires_dist) {
    field("Requires-Dist", r);
    add_extras(r, named);
  }
  std::set<std::string> written;
  for (const auto& e : provides_extra)
    if (written.insert(e).second) field("Provides-Extra", e);
  for (const auto& e : named)
    if (written.insert(e).second) field("Provides-Extra", e);
  if (!description_content_type.empty())
    out += cat("Description-Content-Type: ", one_line(description_content_type), "\n");
  if (!description.empty()) {
    out += "\n";
    out += description;
    if (out.back() != '\n') out += "\n";
  }
  return out;
}

std::string render_wheel_file(const std::string& generator, bool root_is_purelib,
                              const std::string& tag) {
  return cat("Wheel-Version: 1.0\nGenerator: ", generator,
             "\nRoot-Is-Purelib: ", root_is_purelib ? "true" : "false", "\nTag: ", tag, "\n");
}

std::string record_hash(std::string_view data) {
  auto d = Sha256().update(data).digest();
  return "sha256=" + base64_urlsafe_nopad(d.data(), d.size());
}

std::string render_record(const std::vector<RecordRow>& rows) {
  std::string out;
  for (const auto& r : rows) {
    // RECORD is CSV: quote paths holding a comma or a quote.
    std::string path = r.path;
    if (path.find_first_of(",\"") != std::string::npos) {
      std::string q = "\"";
      for (char c : path) q += c == '"' ? std::string("\"\"") : std::string(1, c);
      path = q + "\"";
    }
    out += cat(path, ",", r.hash, ",", r.size, "\n");
  }
  return out;
}

std::vector<std::string> pin_torch(const std::vector<std::string>& requires_dist,
                                   const std::string& torch_minor, bool add_if_missing) {
  std::vector<std::string> out;
  bool pinned = false;
  std::string pin = cat("torch==", torch_minor, ".*");
  for (const auto& r : requires_dist) {
    bool has_marker = r.find(';') != std::string::npos;
    if (manifest::requirement_name(r) == "torch" && !has_marker) {
      if (!pinned) out.push_back(pin);
      pinned = true;
    } else {
      out.push_back(r);
    }
  }
  if (!pinned && add_if_missing) out.insert(out.begin(), pin);
  return out;
}

std::vector<std::string> ParsedMetadata::all(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : headers)
    if (lower(k) == lower(name)) out.push_back(v);
  return out;
}

std::string ParsedMetadata::first(std::string_view name) const {
  auto v = all(name);
  return v.empty() ? std::string() : v.front();
}

ParsedMetadata parse_metadata(std::string_view text) {
  ParsedMetadata m;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = end + 1;
    if (line.empty()) {
      m.body = std::string(text.substr(std::min(pos, text.size())));
      break;
    }
    if ((line[0] == ' ' || line[0] == '\t') && !m.headers.empty()) {  // continuation
      m.headers.back().second += cat("\n", line);
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    m.headers.emplace_back(std::string(trim(line.substr(0, colon))),
                           std::string(trim(line.substr(colon + 1))));
  }
  return m;
}

}  // namespace kiln::wheel
