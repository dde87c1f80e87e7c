#include "index/model.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/markup.h"
#include "core/strings.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "wheel/metadata.h"

namespace kiln::index {

namespace {

// "2026-11-02T10:00:00Z" (PEP 700 upload-time).
std::string iso8601_utc(std::int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (!::gmtime_r(&t, &tm)) return "1970-01-01T00:00:00Z";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

constexpr const char* kApiVersion = "1.1";  // PEP 691 with PEP 700's fields

// Defined below.
std::string iso8601_utc(std::int64_t unix_seconds);

bool all_of(std::string_view text, const char* extra) {
  if (text.empty()) return false;
  for (char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) continue;
    if (std::string_view(extra).find(c) == std::string_view::npos) return false;
  }
  return true;
}

std::string etag_of(std::string_view body) {
  return cat('"', sha256_hex(body).substr(0, 32), '"');
}

const char* kHtmlHead =
    "<!DOCTYPE html>\n<html>\n  <head>\n"
    "    <meta name=\"pypi:repository-version\" content=\"1.1\">\n";

std::string render_root(const std::map<std::string, Target, std::less<>>& targets) {
  std::string out = kHtmlHead;
  out += "    <title>kiln index</title>\n  </head>\n  <body>\n    <h1>kiln index</h1>\n";
  for (const auto& [name, t] : targets)
    out += cat("    <a href=\"", percent_encode(name), "/simple/\">", markup_escape(name),
               "</a><br>\n");
  out += "  </body>\n</html>\n";
  return out;
}

Page render_target(const Target& t) {
  Page page;
  std::string html = kHtmlHead;
  html +=
      cat("    <title>Simple index: ", markup_escape(t.name), "</title>\n  </head>\n  <body>\n");
  nlohmann::json projects = nlohmann::json::array();
  for (const auto& [name, p] : t.projects) {
    html += cat("    <a href=\"", percent_encode(name), "/\">", markup_escape(name), "</a><br>\n");
    projects.push_back({{"name", name}});
  }
  html += "  </body>\n</html>\n";
  page.html = std::move(html);
  page.json =
      nlohmann::json{{"meta", {{"api-version", kApiVersion}}}, {"projects", projects}}.dump();
  page.html_etag = etag_of(page.html);
  page.json_etag = etag_of(page.json);
  return page;
}

Page render_project(const Project& p) {
  Page page;
  std::string html = kHtmlHead;
  html += cat("    <title>Links for ", markup_escape(p.name), "</title>\n  </head>\n  <body>\n",
              "    <h1>Links for ", markup_escape(p.name), "</h1>\n");
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : p.files) {
    std::string href = percent_encode(f.filename);
    html += cat("    <a href=\"", href, "#sha256=", f.sha256, "\"");
    if (!f.requires_python.empty())
      html += cat(" data-requires-python=\"", markup_escape(f.requires_python), "\"");
    html += cat(" data-dist-info-metadata=\"sha256=", f.metadata_sha256,
                "\" data-core-metadata=\"sha256=", f.metadata_sha256, "\">",
                markup_escape(f.filename), "</a><br>\n");
    nlohmann::json j = {{"filename", f.filename},
                        {"url", href},
                        {"hashes", {{"sha256", f.sha256}}},
                        {"core-metadata", {{"sha256", f.metadata_sha256}}},
                        {"dist-info-metadata", {{"sha256", f.metadata_sha256}}},
                        {"size", f.size},
                        {"upload-time", iso8601_utc(f.committed_at)}};
    if (!f.requires_python.empty()) j["requires-python"] = f.requires_python;
    files.push_back(std::move(j));
  }
  html += "  </body>\n</html>\n";
  page.html = std::move(html);
  page.json = nlohmann::json{{"meta", {{"api-version", kApiVersion}}},
                             {"name", p.name},
                             {"files", files},
                             {"versions", p.versions}}
                  .dump();
  page.html_etag = etag_of(page.html);
  page.json_etag = etag_of(page.json);
  return page;
}

}  // namespace

Expected<packaging::WheelFileName> index_wheel_name(std::string_view filename) {
  auto bad = [&](std::string_view why) {
    return Error::bad_input(cat("wheel file name '", printable_excerpt(filename), "': ", why));
  };
  if (filename.size() > 255) return bad("longer than 255 bytes");
  std::string_view stem =
      filename.substr(0, filename.size() - (filename.ends_with(".whl") ? 4 : 0));
  if (!stem.empty() && !all_of(stem, "._+!-")) return bad("holds a character besides ._+!-");
  if (!stem.empty() && !std::isalnum(static_cast<unsigned char>(stem.front())))
    return bad("the name does not start with a letter or digit");
  return packaging::parse_wheel_file_name(filename);
}

bool is_valid_target_name(std::string_view name) {
  return name.size() <= 128 && all_of(name, "._+-") &&
         std::isalnum(static_cast<unsigned char>(name.front()));
}

Project empty_project(std::string_view normalized_name) {
  Project p;
  p.name = std::string(normalized_name);
  p.page = render_project(p);
  return p;
}

Target empty_target(std::string_view name) {
  Target t;
  t.name = std::string(name);
  t.page = render_target(t);
  return t;
}

const File* Project::find(std::string_view filename) const {
  auto it = std::lower_bound(files.begin(), files.end(), filename,
                             [](const File& f, std::string_view n) { return f.filename < n; });
  return it != files.end() && it->filename == filename ? &*it : nullptr;
}

const Target* IndexModel::target(std::string_view name) const {
  auto it = targets.find(name);
  return it == targets.end() ? nullptr : &it->second;
}

namespace {

// Sorts each project's files and versions and renders the pages of one target.
void render(Target& t) {
  for (auto& [pname, p] : t.projects) {
    std::sort(p.files.begin(), p.files.end(),
              [](const File& a, const File& b) { return a.filename < b.filename; });
    p.versions.clear();
    for (const auto& f : p.files) p.versions.push_back(f.version);
    std::sort(p.versions.begin(), p.versions.end(), packaging::version_less);
    p.versions.erase(std::unique(p.versions.begin(), p.versions.end()), p.versions.end());
    p.page = render_project(p);
  }
  t.page = render_target(t);
}

}  // namespace

Target IndexModel::known_target(std::string_view name) const {
  Target t = everywhere;
  t.name = std::string(name);
  t.page = render_target(t);
  return t;
}

namespace {

// The entry's parsed file name, or why it cannot be served (its file name, its sha256, its
// metadata): the same checks for the cache's entries and kiln's own wheels.
Expected<packaging::WheelFileName> servable(const WheelEntry& e) {
  auto name = index_wheel_name(e.filename);
  if (!name) return name.error();
  if (!is_sha256_hex(e.sha256)) return Error::failed("sha256 is not 64 lowercase hex digits");
  if (e.metadata.empty()) return Error::failed(cat(e.filename, ": no core metadata"));
  // What an installer reads from the file must be what the page offers it as: a file named
  // 1!2.0 whose METADATA says 0.1.0 would be taken for a version it is not.
  wheel::ParsedMetadata md = wheel::parse_metadata(e.metadata);
  std::string md_name = md.first("Name"), md_version = md.first("Version");
  if (packaging::normalize_name(md_name) != name->project)
    return Error::failed(
        cat(e.filename, ": its METADATA names the project '", printable_excerpt(md_name, 80), "'"));
  auto md_v = packaging::Version::parse(md_version);
  if (!md_v || compare(*md_v, name->parsed_version) != 0)
    return Error::failed(cat(e.filename, ": its METADATA says Version ",
                             printable_excerpt(md_version, 80), ", not ", name->version));
  return name;
}

}  // namespace

IndexModel build_model(std::vector<WheelEntry> entries) {
  IndexModel model;
  // Entries for every target: copied into each target below, and kept as `everywhere`.
  std::vector<WheelEntry> common;
  std::erase_if(entries, [&](WheelEntry& e) {
    if (e.target != kEveryTarget) return false;
    common.push_back(std::move(e));
    return true;
  });
  struct Chosen {
    WheelEntry entry;
    packaging::WheelFileName name;
  };
  // (target, project, version, tags) -> the last build's entry, else the newest.
  std::map<std::tuple<std::string, std::string, std::string, std::string>, Chosen> chosen;
  for (auto& e : entries) {
    auto skip = [&](std::string_view why) {
      model.skipped.push_back(cat("cache entry ", e.key, ": ", why));
    };
    if (!is_valid_target_name(e.target)) {
      skip(cat("invalid target name '", e.target, "'"));
      continue;
    }
    auto name = servable(e);
    if (!name) {
      skip(name.error().message);
      continue;
    }
    auto id = std::make_tuple(e.target, name->project, name->version, name->tag_text());
    auto it = chosen.find(id);
    if (it != chosen.end()) {
      const WheelEntry& old = it->second.entry;
      if (std::tie(old.last, old.committed_at, old.key) > std::tie(e.last, e.committed_at, e.key))
        continue;
    }
    chosen.insert_or_assign(id, Chosen{std::move(e), std::move(*name)});
  }

  std::set<std::string> targets;
  for (const auto& [id, c] : chosen) targets.insert(c.entry.target);
  for (const auto& e : common) {
    auto name = servable(e);
    if (!name) {
      model.skipped.push_back(cat(e.dir.string(), "/", e.filename, ": ", name.error().message));
      continue;
    }
    for (const auto& t : targets) {
      WheelEntry copy = e;
      copy.target = t;
      chosen.insert_or_assign(std::make_tuple(t, name->project, name->version, name->tag_text()),
                              Chosen{std::move(copy), *name});
    }
    chosen.insert_or_assign(
        std::make_tuple(std::string(kEveryTarget), name->project, name->version, name->tag_text()),
        Chosen{e, *name});
  }

  for (auto& [id, c] : chosen) {
    Target& t = c.entry.target == kEveryTarget ? model.everywhere : model.targets[c.entry.target];
    t.name = c.entry.target;
    Project& p = t.projects[c.name.project];
    p.name = c.name.project;
    File f;
    f.filename = c.entry.filename;
    f.version = c.name.version;
    f.sha256 = c.entry.sha256;
    f.size = c.entry.size;
    f.committed_at = c.entry.committed_at;
    f.key = c.entry.key;
    f.dir = c.entry.dir;
    f.requires_python = wheel::parse_metadata(c.entry.metadata).first("Requires-Python");
    f.metadata_sha256 = sha256_hex(c.entry.metadata);
    f.archs = c.entry.archs;
    f.metadata = std::move(c.entry.metadata);
    if (!c.entry.attestation.empty()) {
      f.attestation_sha256 = sha256_hex(c.entry.attestation);
      f.attestation = std::move(c.entry.attestation);
    }
    p.files.push_back(std::move(f));
  }
  for (auto& [tname, t] : model.targets) render(t);
  render(model.everywhere);
  model.root_html = render_root(model.targets);
  model.root_etag = etag_of(model.root_html);
  return model;
}

namespace {

// An arch token as entry.json and ArchList::canonical() write it ("sm_90", "sm_120+ptx",
// "compute_120", "sm_90a"): anything else is not listed.
bool is_arch_token(std::string_view token) {
  return token.size() <= 32 && all_of(token, "_+") &&
         (token.starts_with("sm_") || token.starts_with("compute_"));
}

// The tokens in arch order ("sm_80", "sm_90", "sm_90a", "sm_120"), not the string order that would
// put sm_120 first.
std::vector<std::string> arch_order(const std::set<std::string>& tokens) {
  auto number = [](const std::string& t) {
    std::size_t at = t.find('_') + 1, end = at;
    while (end < t.size() && end - at < 6 && t[end] >= '0' && t[end] <= '9') ++end;
    return end > at ? std::stoi(t.substr(at, end - at)) : 0;
  };
  std::vector<std::string> out(tokens.begin(), tokens.end());
  std::stable_sort(out.begin(), out.end(), [&](const std::string& a, const std::string& b) {
    return number(a) < number(b);
  });
  return out;
}

std::set<std::string> arch_tokens(std::string_view archs) {
  std::set<std::string> out;
  for (const auto& token : split(archs, ";"))
    if (is_arch_token(token)) out.insert(std::string(token));
  return out;
}

// "1.7.0+cu130torch2.11" -> {"13.0", "2.11"} (wheel::local_label's form); {"", ""} for another.
std::pair<std::string, std::string> label_facts(std::string_view version) {
  auto plus = version.find('+');
  if (plus == std::string_view::npos) return {};
  std::string_view label = version.substr(plus + 1);
  auto torch_at = label.find("torch");
  if (!label.starts_with("cu") || torch_at == std::string_view::npos) return {};
  std::string_view cuda = label.substr(2, torch_at - 2), torch = label.substr(torch_at + 5);
  auto digits = [](std::string_view t) {
    return !t.empty() && t.size() <= 8 &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  auto dot = torch.find('.');
  if (cuda.size() < 2 || !digits(cuda) || dot == std::string_view::npos ||
      !digits(torch.substr(0, dot)) || !digits(torch.substr(dot + 1)))
    return {};
  return {cat(cuda.substr(0, cuda.size() - 1), ".", cuda.substr(cuda.size() - 1)),
          std::string(torch)};
}

nlohmann::json target_json(const Target& t, const TargetFacts* declared) {
  std::set<std::string> python;                          // CPython ABI tags
  std::optional<std::set<std::string>> archs;            // what every compiled wheel holds
  std::set<std::pair<std::string, std::string>> labels;  // (cuda, torch) of labelled wheels
  nlohmann::json projects = nlohmann::json::array();
  for (const auto& [pname, p] : t.projects) {
    std::set<std::string> abi;
    std::optional<std::set<std::string>> project_archs;
    for (const auto& f : p.files) {
      auto name = index_wheel_name(f.filename);
      if (!name) continue;
      for (const auto& a : name->abi_tags) {
        abi.insert(a);
        if (a.starts_with("cp")) python.insert(a);
      }
      if (auto l = label_facts(f.version); !l.first.empty()) labels.insert(l);
      if (f.archs.empty()) continue;
      std::set<std::string> have = arch_tokens(f.archs);
      auto intersect = [&](std::optional<std::set<std::string>>& into) {
        if (!into) {
          into = have;
          return;
        }
        std::erase_if(*into, [&](const std::string& a) { return !have.contains(a); });
      };
      intersect(project_archs);
      intersect(archs);
    }
    nlohmann::json j = {{"name", pname},
                        {"versions", p.versions},
                        {"abi", std::vector<std::string>(abi.begin(), abi.end())}};
    if (project_archs) j["archs"] = arch_order(*project_archs);
    projects.push_back(std::move(j));
  }
  nlohmann::json j = {{"name", t.name},
                      {"url", cat(percent_encode(t.name), "/simple/")},
                      {"declared", declared != nullptr}};
  std::string torch, cuda;
  if (labels.size() == 1) std::tie(cuda, torch) = *labels.begin();
  if (declared) {
    if (!declared->torch.empty()) torch = declared->torch;
    if (!declared->cuda.empty()) cuda = declared->cuda;
    python.insert(declared->python.begin(), declared->python.end());
    archs.emplace();
    for (const auto& a : declared->archs)
      if (is_arch_token(a)) archs->insert(a);
  }
  if (!torch.empty()) j["torch"] = torch;
  if (!cuda.empty()) j["cuda"] = cuda;
  j["python"] = std::vector<std::string>(python.begin(), python.end());
  j["archs"] = archs ? arch_order(*archs) : std::vector<std::string>();
  j["projects"] = std::move(projects);
  return j;
}

}  // namespace

std::string targets_json(const IndexModel& model,
                         const std::map<std::string, TargetFacts, std::less<>>& declared) {
  nlohmann::json targets = nlohmann::json::array();
  std::set<std::string, std::less<>> names;
  for (const auto& [name, t] : model.targets) names.insert(name);
  for (const auto& [name, facts] : declared)
    if (is_valid_target_name(name)) names.insert(name);
  for (const auto& name : names) {
    auto it = declared.find(name);
    const TargetFacts* facts = it == declared.end() ? nullptr : &it->second;
    if (const Target* t = model.target(name))
      targets.push_back(target_json(*t, facts));
    else
      targets.push_back(target_json(model.known_target(name), facts));
  }
  return nlohmann::json{{"meta", {{"api-version", kApiVersion}}}, {"targets", std::move(targets)}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string percent_encode(std::string_view text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += ch;
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace kiln::index
