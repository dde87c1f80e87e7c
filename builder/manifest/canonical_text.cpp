#include "manifest/canonical_text.h"

#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"
#include "manifest/toml_reader.h"

namespace kiln::manifest {

using json = nlohmann::json;

namespace {

// One object of the canonical document, its members read at their paths
// ("inputs.package.source.kind"); a member of the wrong type or missing raises a bad-input error.
class Doc {
 public:
  Doc(const json& j, std::string path) : j_(j), path_(std::move(path)) {
    if (!j.is_object()) bad("is not an object");
  }
  const json& at(const char* key) const {
    auto it = j_.find(key);
    if (it == j_.end()) Doc(j_, cat(path_, ".", key)).bad("is missing");
    return *it;
  }
  std::string str(const char* key) const {
    const json& v = at(key);
    if (!v.is_string()) sub(key).bad("is not a string");
    return v.get<std::string>();
  }
  std::int64_t integer(const char* key) const {
    const json& v = at(key);
    if (!v.is_number_integer()) sub(key).bad("is not an integer");
    if (v.is_number_unsigned() &&
        v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
      sub(key).bad("is out of range");
    return v.get<std::int64_t>();
  }
  bool has(const char* key) const { return j_.contains(key); }
  // An array of strings as TOML; `optional`: absent is empty.
  toml::array strings(const char* key, bool optional = false) const {
    toml::array out;
    if (optional && !has(key)) return out;
    const json& v = at(key);
    if (!v.is_array()) sub(key).bad("is not an array");
    for (const auto& e : v) {
      if (!e.is_string()) sub(key).bad("holds something that is not a string");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  // Each object of an array (absent: none).
  std::vector<Doc> objects(const char* key) const {
    std::vector<Doc> out;
    if (!has(key)) return out;
    const json& v = at(key);
    if (!v.is_array()) sub(key).bad("is not an array");
    for (std::size_t i = 0; i < v.size(); ++i)
      out.emplace_back(v[i], cat(path_, ".", key, "[", i, "]"));
    return out;
  }
  Doc object(const char* key) const { return Doc(at(key), cat(path_, ".", key)); }
  [[noreturn]] void bad(const std::string& what) const {
    raise(Error::bad_input(cat("kiln.json: ", path_, " ", what)));
  }

 private:
  Doc sub(const char* key) const { return Doc(json::object(), cat(path_, ".", key)); }
  const json& j_;
  std::string path_;
};

// `key` = the string array at `key` in `from`, when it is not empty.
void put_strings(toml::table& t, const char* toml_key, const Doc& from, const char* key,
                 bool optional = true) {
  toml::array a = from.strings(key, optional);
  if (!a.empty()) t.insert(toml_key, std::move(a));
}

void put_string(toml::table& t, const char* toml_key, const std::string& value) {
  if (!value.empty()) t.insert(toml_key, value);
}

std::string text_of(const toml::table& t) {
  std::ostringstream out;
  out << toml::toml_formatter(t, toml::format_flags::none);
  return out.str() + "\n";
}

toml::table package_table(const Doc& p) {
  toml::table t{{"name", p.str("display_name")},
                {"version", p.str("version")},
                {"summary", p.str("summary")},
                {"license", p.str("license")},
                {"requires-python", p.str("requires_python")}};
  put_strings(t, "license-files", p, "license_files");
  put_string(t, "readme", p.str("readme"));
  put_string(t, "homepage", p.str("homepage"));
  put_strings(t, "extra-dependencies", p, "extra_dependencies");
  return t;
}

toml::table source_table(const Doc& s, const SourcePlace& place) {
  toml::table t;
  std::string sha256 = s.str("sha256");
  switch (s.integer("kind")) {
    case 0:  // Source::Kind::Pypi
      t.insert("pypi", s.str("pypi"));
      put_string(t, "file", s.str("file"));
      break;
    case 1:  // Url
      if (place.url.empty()) s.bad("is a url source, and the wheel names no URL for it");
      t.insert("url", place.url);
      if (place.size) {
        if (*place.size > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
          s.bad("has a size out of range");
        t.insert("size", static_cast<std::int64_t>(*place.size));
      }
      break;
    case 2:  // Git
      if (place.url.empty()) s.bad("is a git source, and the wheel names no repository for it");
      t.insert("git", place.url);
      t.insert("commit", s.str("commit"));
      put_strings(t, "submodules", s, "submodules");
      break;
    case 3:  // Local
      if (place.local.empty()) s.bad("is a local source: give its tree (--source DIR)");
      t.insert("path", place.local.string());
      break;
    default:
      s.bad("names an unknown source kind");
  }
  put_string(t, "sha256", sha256);
  return t;
}

toml::table extension_table(const Doc& e) {
  toml::table t{{"name", e.str("name")}};
  put_strings(t, "sources", e, "sources", false);
  t.insert("include-dirs", e.strings("include_dirs"));
  t.insert("define-macros", e.strings("define_macros"));
  t.insert("cxx-flags", e.strings("cxx_flags"));
  t.insert("nvcc-flags", e.strings("nvcc_flags"));
  put_strings(t, "libraries", e, "libraries");
  put_strings(t, "library-dirs", e, "library_dirs");
  put_strings(t, "extra-link-args", e, "extra_link_args");
  if (e.has("kind")) t.insert("kind", e.str("kind"));
  toml::array shards;
  for (const Doc& s : e.objects("shards")) {
    toml::table shard{{"source", s.str("source")},
                      {"units", s.integer("units")},
                      {"index-define", s.str("index_define")},
                      {"count-define", s.str("count_define")}};
    if (s.has("max_shards")) shard.insert("max-shards", s.integer("max_shards"));
    shards.push_back(std::move(shard));
  }
  if (!shards.empty()) t.insert("shard", std::move(shards));
  return t;
}

toml::table build_table(const Doc& p) {
  toml::table t{{"backend", p.str("backend")}};
  put_strings(t, "packages", p, "packages");
  toml::array extensions;
  for (const Doc& e : p.objects("extensions")) extensions.push_back(extension_table(e));
  if (!extensions.empty()) t.insert("extension", std::move(extensions));
  return t;
}

std::string manifest_document(const json& package, const SourcePlace& place) {
  Doc p(package, "inputs.package");
  toml::table root{{"package", package_table(p)},
                   {"source", source_table(p.object("source"), place)}};
  toml::array series;
  for (const Doc& patch : p.objects("patches")) series.push_back(patch.str("name"));
  if (!series.empty()) root.insert("patches", toml::table{{"series", std::move(series)}});
  root.insert("build", build_table(p));
  return text_of(root);
}

toml::table torch_table(const Doc& t, const std::string& index_url) {
  std::string source = t.str("source");
  toml::table out{{"source", source}};
  put_string(out, "version", t.str("version"));
  if (source != "pypi") return out;
  put_string(out, "index-url", index_url);
  toml::array wheels;
  for (const Doc& w : t.objects("wheels"))
    wheels.push_back(toml::table{
        {"python", w.str("python")}, {"file", w.str("file")}, {"sha256", w.str("sha256")}});
  out.insert("wheel", std::move(wheels));
  return out;
}

toml::table cuda_table(const Doc& c) {
  toml::table out{{"toolkit", c.str("toolkit")}, {"version", c.str("version")}};
  put_string(out, "home", c.str("home"));
  toml::array wheels, debs;
  for (const Doc& w : c.objects("wheels"))
    wheels.push_back(toml::table{{"file", w.str("file")}, {"sha256", w.str("sha256")}});
  for (const Doc& d : c.objects("debs"))
    debs.push_back(toml::table{{"path", d.str("path")}, {"sha256", d.str("sha256")}});
  if (!wheels.empty()) out.insert("wheel", std::move(wheels));
  if (!debs.empty()) out.insert("deb", std::move(debs));
  return out;
}

std::string target_document(const json& target, const std::string& torch_index_url) {
  Doc t(target, "inputs.target");
  toml::table head{{"description", "rebuilt from a wheel's kiln.json"}, {"archs", t.str("archs")}};
  if (std::int64_t floor = t.integer("manylinux"); floor >= 0)
    head.insert("manylinux", cat("2_", floor));
  Doc py = t.object("python");
  toml::table python;
  put_string(python, "interpreter", py.str("interpreter"));
  put_string(python, "version", py.str("version"));
  toml::table root{{"target", std::move(head)},
                   {"python", std::move(python)},
                   {"torch", torch_table(t.object("torch"), torch_index_url)},
                   {"cuda", cuda_table(t.object("cuda"))},
                   {"compiler", toml::table{{"cxx", t.str("cxx")}}}};
  return text_of(root);
}

}  // namespace

Expected<std::string> manifest_text(const json& package, const SourcePlace& place) {
  try {
    return manifest_document(package, place);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<std::string> target_text(const json& target, const std::string& torch_index_url) {
  try {
    return target_document(target, torch_index_url);
  } catch (const KilnError& e) {
    return e.error();
  }
}

}  // namespace kiln::manifest
