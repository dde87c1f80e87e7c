#include "manifest/manifest.h"

#include <algorithm>
#include <set>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/license.h"
#include "manifest/limits.h"
#include "manifest/requirement.h"
#include "manifest/toml_reader.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"

namespace kiln::manifest {

bool is_identifier(std::string_view s) {
  auto word_char = [](char c) { return is_ascii_alnum(c) || c == '_'; };
  return !s.empty() && !is_ascii_digit(s[0]) && std::all_of(s.begin(), s.end(), word_char);
}

namespace {

bool is_dotted_identifier(std::string_view s) {
  for (const auto& part : split(s, ".", /*skip_empty=*/false))
    if (!is_identifier(part)) return false;
  return true;
}

// A relative path inside the source tree: no absolute paths, no "..".
bool is_tree_path(std::string_view p) {
  if (p.empty() || p.front() == '/') return false;
  for (const auto& part : split(p, "/", /*skip_empty=*/false))
    if (part == ".." || part.empty()) return false;
  return true;
}

// A library for -l: not an option (no leading '-') and not a path (no '/'); letters, digits and
// "_.+-:" (gcc's -l:libfoo.so.1 form).
bool is_library_name(std::string_view s) {
  return !s.empty() && s.front() != '-' && std::all_of(s.begin(), s.end(), [](char c) {
    return is_ascii_alnum(c) || c == '_' || c == '.' || c == '+' || c == '-' || c == ':';
  });
}

void check_sha256(const TableReader& t, std::string_view key, const std::string& value) {
  if (!is_sha256_hex(value))
    t.fail(key, cat("bad sha256 '", value, "': expected 64 lowercase hexadecimal digits"));
}

void check_tree_paths(const TableReader& t, std::string_view key,
                      const std::vector<std::string>& paths) {
  for (std::size_t i = 0; i < paths.size(); ++i)
    if (!is_tree_path(paths[i]))
      fail_at(t.source(), t.element_position(key, i),
              cat("'", paths[i], "' must be a relative path inside the source tree"));
}

// Each of `paths` (the list at `key` of the table `t` reads) as a reference into the source tree.
void refer(Manifest& m, const TableReader& t, std::string_view key,
           const std::vector<std::string>& paths, TreeReference::Use use, bool directory) {
  for (std::size_t i = 0; i < paths.size(); ++i)
    m.tree_references.push_back(
        {paths[i], directory, use, t.qualified(key), t.element_position(key, i)});
}

Source read_source(const TableReader& t, const std::filesystem::path& manifest_dir) {
  Source s;
  int kinds = t.has("pypi") + t.has("url") + t.has("git") + t.has("path");
  if (kinds != 1)
    fail_at(t.source(), t.position(),
            "[source] needs exactly one of 'pypi', 'url', 'git' or 'path'");
  if (t.has("pypi")) {
    s.kind = Source::Kind::Pypi;
    s.pypi = t.required_string("pypi");
    t.check_length("pypi", s.pypi, kMaxNameBytes);
    if (!packaging::is_valid_project_name(s.pypi))
      t.fail("pypi", cat("bad project name '", s.pypi, "'"));
    s.file = t.string("file").value_or("");
    s.sha256 = t.required_string("sha256");
    check_sha256(t, "sha256", s.sha256);
  } else if (t.has("url")) {
    s.kind = Source::Kind::Url;
    s.url = t.required_string("url");
    if (s.url.rfind("https://", 0) != 0 && s.url.rfind("http://", 0) != 0 &&
        s.url.rfind("file://", 0) != 0)
      t.fail("url", cat("bad url '", s.url, "': expected http://, https:// or file://"));
    s.sha256 = t.required_string("sha256");
    check_sha256(t, "sha256", s.sha256);
    if (auto size = t.integer("size")) {
      if (*size < 0)
        t.fail("size", cat("bad size ", *size, ": expected the archive's size in bytes"));
      s.size = static_cast<std::uint64_t>(*size);
    }
  } else if (t.has("git")) {
    s.kind = Source::Kind::Git;
    s.url = t.required_string("git");
    s.commit = t.required_string("commit");
    if (s.commit.size() != 40 || !is_hex(s.commit) || lower(s.commit) != s.commit)
      t.fail("commit",
             cat("bad commit '", s.commit, "': expected 40 lowercase hexadecimal digits"));
    s.submodules = t.strings("submodules").value_or(std::vector<std::string>{});
  } else {
    s.kind = Source::Kind::Local;
    std::string p = t.required_string("path");
    s.path = (manifest_dir / p).lexically_normal();
    std::error_code ec;
    if (!std::filesystem::exists(s.path, ec))
      t.fail("path", cat("source path '", p, "' does not exist (", s.path.string(), ")"));
    if (!std::filesystem::is_directory(s.path, ec)) {
      s.sha256 = t.required_string("sha256");
      check_sha256(t, "sha256", s.sha256);
    } else if (t.has("sha256")) {
      t.fail("sha256", "a local directory source has no sha256 (kiln hashes the tree)");
    }
  }
  // Keys that belong to another kind of source are mistakes, not options.
  auto forbid = [&](bool allowed, std::string_view key) {
    if (!allowed && t.has(key))
      t.fail(key, cat("'", t.qualified(key), "' does not apply to this kind of source"));
  };
  forbid(s.kind == Source::Kind::Pypi, "file");
  forbid(s.kind == Source::Kind::Git, "commit");
  forbid(s.kind == Source::Kind::Git, "submodules");
  forbid(s.kind != Source::Kind::Git, "sha256");
  forbid(s.kind == Source::Kind::Url, "size");
  return s;
}

Shardable read_shard(const TableReader& t, const Extension& e) {
  Shardable s;
  s.source = t.required_string("source");
  if (std::find(e.sources.begin(), e.sources.end(), s.source) == e.sources.end())
    t.fail("source", cat("'", s.source, "' is not one of the extension's sources"));
  if (!s.source.ends_with(".cu") && !s.source.ends_with(".cpp") && !s.source.ends_with(".cc") &&
      !s.source.ends_with(".cxx"))
    t.fail("source", cat("'", s.source, "' is not a C++ or CUDA source"));
  auto units = t.integer("units");
  if (!units) t.fail_missing("units");
  if (*units < 1 || *units > 1024)
    t.fail("units", cat("bad unit count ", *units, ": expected 1 to 1024"));
  s.units = static_cast<int>(*units);
  if (auto max = t.integer("max-shards")) {
    if (*max < 1 || *max > s.units)
      t.fail("max-shards",
             cat("bad shard limit ", *max, ": expected 1 to the ", s.units, " units"));
    s.max_shards = static_cast<int>(*max);
  }
  s.index_define = t.required_string("index-define");
  if (!is_identifier(s.index_define))
    t.fail("index-define", cat("bad macro name '", s.index_define, "'"));
  s.count_define = t.required_string("count-define");
  if (!is_identifier(s.count_define))
    t.fail("count-define", cat("bad macro name '", s.count_define, "'"));
  if (s.count_define == s.index_define)
    t.fail("count-define", "the index and count macros must differ");
  return s;
}

// libraries, library-dirs, extra-link-args and kind.
void read_link_keys(const TableReader& t, Extension& e) {
  e.libraries = t.strings("libraries").value_or(std::vector<std::string>{});
  for (std::size_t i = 0; i < e.libraries.size(); ++i)
    if (!is_library_name(e.libraries[i]))
      fail_at(t.source(), t.element_position("libraries", i),
              cat("bad library name '", e.libraries[i],
                  "': expected a name for -l (letters, digits, '_', '.', '+', '-', ':'; not "
                  "starting with '-', no '/')"));
  e.library_dirs = t.strings("library-dirs").value_or(std::vector<std::string>{});
  check_tree_paths(t, "library-dirs", e.library_dirs);
  e.extra_link_args = t.strings("extra-link-args").value_or(std::vector<std::string>{});
  for (std::size_t i = 0; i < e.extra_link_args.size(); ++i)
    if (e.extra_link_args[i].empty() || e.extra_link_args[i] == "-o")
      fail_at(t.source(), t.element_position("extra-link-args", i),
              cat("bad link argument '", e.extra_link_args[i],
                  "': empty, or '-o' (kiln names the output)"));
  if (t.has("kind")) {
    e.kind = t.required_string("kind");
    if (e.kind != "cuda" && e.kind != "cxx")
      t.fail("kind", cat("bad extension kind '", e.kind, "': expected \"cuda\" or \"cxx\""));
  }
  if (!e.cuda())
    for (std::size_t i = 0; i < e.sources.size(); ++i)
      if (e.sources[i].ends_with(".cu"))
        fail_at(t.source(), t.element_position("sources", i),
                cat("'", e.sources[i], "' is a CUDA source, but the extension's kind is \"cxx\""));
}

Extension read_extension(const TableReader& t) {
  Extension e;
  e.name = t.required_string("name");
  t.check_length("name", e.name, kMaxNameBytes);
  if (!is_dotted_identifier(e.name))
    t.fail("name", cat("bad extension module name '", e.name, "': expected a Python identifier"));
  auto sources = t.strings("sources");
  if (!sources) t.fail_missing("sources");
  if (sources->empty()) t.fail("sources", "'build.extension.sources' must not be empty");
  e.sources = *sources;
  check_tree_paths(t, "sources", e.sources);
  for (std::size_t i = 0; i < e.sources.size(); ++i) {
    const auto& src = e.sources[i];
    auto ext = std::filesystem::path(src).extension().string();
    if (ext != ".cpp" && ext != ".cc" && ext != ".cxx" && ext != ".cu")
      fail_at(t.source(), t.element_position("sources", i),
              cat("'", src, "' is not a C++ or CUDA source (.cpp, .cc, .cxx, .cu)"));
  }
  e.include_dirs = t.strings("include-dirs").value_or(std::vector<std::string>{});
  check_tree_paths(t, "include-dirs", e.include_dirs);
  e.define_macros = t.strings("define-macros").value_or(std::vector<std::string>{});
  for (std::size_t i = 0; i < e.define_macros.size(); ++i) {
    std::string name = e.define_macros[i].substr(0, e.define_macros[i].find('='));
    if (!is_identifier(name))
      fail_at(t.source(), t.element_position("define-macros", i),
              cat("bad macro '", e.define_macros[i], "': expected NAME or NAME=VALUE"));
  }
  e.cxx_flags = t.strings("cxx-flags").value_or(std::vector<std::string>{});
  e.nvcc_flags = t.strings("nvcc-flags").value_or(std::vector<std::string>{});
  for (std::size_t i = 0; i < e.nvcc_flags.size(); ++i) {
    const auto& f = e.nvcc_flags[i];
    if (f.find("-gencode") == 0 || f.find("-arch") == 0 || f.find("--gpu-architecture") == 0 ||
        f.find("--generate-code") == 0 || f.find("-code=") == 0)
      fail_at(t.source(), t.element_position("nvcc-flags", i),
              cat("'", f, "' selects architectures: archs come from the target, not the manifest"));
  }
  read_link_keys(t, e);
  for (const toml::table* shard : t.tables("shard")) {
    TableReader sr(t.source(), *shard, "build.extension.shard",
                   {"source", "units", "max-shards", "index-define", "count-define"});
    Shardable s = read_shard(sr, e);
    for (const auto& other : e.shards)
      if (other.source == s.source)
        sr.fail("source", cat("'", s.source, "' is declared shardable twice"));
    e.shards.push_back(std::move(s));
  }
  return e;
}

// [package]: the project's name, version and core metadata.
void read_package(const SourceText& source, TableReader& pkg, Manifest& m) {
  m.name = pkg.required_string("name");
  m.name_at = pkg.position("name");
  pkg.check_length("name", m.name, kMaxNameBytes);
  if (!packaging::is_valid_project_name(m.name))
    pkg.fail("name",
             cat("bad package name '", m.name, "': expected letters, digits, '-', '_' or '.'"));
  m.version = pkg.required_string("version");
  pkg.check_length("version", m.version, kMaxVersionBytes);
  if (!packaging::is_canonical_version(m.version))
    pkg.fail("version",
             cat("bad version '", m.version, "': expected a PEP 440 version such as 1.6.1"));
  m.summary = pkg.required_string("summary");  // one line: string() refuses control characters
  m.license = pkg.required_string("license");
  if (auto problem = license_expression_problem(m.license); !problem.empty())
    pkg.fail("license", cat("bad license '", printable_excerpt(m.license), "': ", problem,
                            "; expected an SPDX expression, e.g. \"MIT\" or \"BSD-3-Clause\""));
  m.requires_python = pkg.required_string("requires-python");
  pkg.check_length("requires-python", m.requires_python, kMaxRequirementBytes);
  if (!packaging::is_valid_specifier_set(m.requires_python))
    pkg.fail("requires-python",
             cat("bad version specifier '", m.requires_python, "': expected e.g. '>=3.9'"));
  m.homepage = pkg.string("homepage").value_or("");
  m.fixture = pkg.boolean("fixture").value_or(false);
  m.license_files = pkg.strings("license-files").value_or(std::vector<std::string>{});
  check_tree_paths(pkg, "license-files", m.license_files);
  m.readme = pkg.string("readme").value_or("");
  if (!m.readme.empty() && !is_tree_path(m.readme))
    pkg.fail("readme", cat("'", m.readme, "' must be a relative path inside the source tree"));
  refer(m, pkg, "license-files", m.license_files, TreeReference::Use::Always, false);
  if (!m.readme.empty())
    m.tree_references.push_back(
        {m.readme, false, TreeReference::Use::Always, "package.readme", pkg.position("readme")});
  if (pkg.has("dependencies"))
    pkg.fail("dependencies",
             "'package.dependencies' is no more: a wheel's requirements are the sdist's own "
             "(its PKG-INFO); list only what kiln must add, each with its reason, in "
             "'extra-dependencies'");
  m.extra_dependencies = pkg.strings("extra-dependencies").value_or(std::vector<std::string>{});
  pkg.check_lengths("extra-dependencies", m.extra_dependencies, kMaxRequirementBytes);
  for (std::size_t i = 0; i < m.extra_dependencies.size(); ++i) {
    if (!is_valid_requirement(m.extra_dependencies[i]))
      fail_at(source, pkg.element_position("extra-dependencies", i),
              cat("bad requirement '", m.extra_dependencies[i],
                  "': expected PEP 508, e.g. 'einops>=0.6'"));
  }
}

// The file's place names the package: manifests/<name>/<version>.toml.
void check_file_place(TableReader& pkg, const std::filesystem::path& file, const Manifest& m) {
  if (file.extension() != ".toml") return;
  std::string dir = file.parent_path().filename().string();
  if (packaging::normalize_name(dir) != packaging::normalize_name(m.name) && dir != "manifests")
    pkg.fail("name", cat("package '", m.name, "' is declared in directory '", dir,
                         "': the directory must be the package name"));
  if (file.stem().string() != m.version && dir != "manifests")
    pkg.fail("version", cat("version '", m.version, "' is declared in '", file.filename().string(),
                            "': the file must be named ", m.version, ".toml"));
}

// [patches]: the series, each file found and hashed.
void read_patches(const SourceText& source, TableReader& pr, const std::filesystem::path& file,
                  const std::filesystem::path& patches_root, Manifest& m) {
  std::filesystem::path dir = patches_root / packaging::normalize_name(m.name) / m.version;
  if (auto d = pr.string("dir")) dir = (file.parent_path() / *d).lexically_normal();
  auto series = pr.strings("series");
  if (!series) pr.fail_missing("series");
  std::set<std::string> seen;
  for (std::size_t i = 0; i < series->size(); ++i) {
    const std::string& name = (*series)[i];
    Position at = pr.element_position("series", i);
    if (!is_tree_path(name)) fail_at(source, at, cat("bad patch name '", name, "'"));
    if (!seen.insert(name).second) fail_at(source, at, cat("patch '", name, "' is listed twice"));
    Patch p{name, dir / name, ""};
    auto digest = sha256_file(p.path);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p.path, ec) || !digest)
      fail_at(source, at,
              cat("patch file '", name, "' does not exist (looked in ", dir.string(), ")"));
    p.sha256 = *digest;
    m.patches.push_back(std::move(p));
  }
}

const BackendSpec* read_backend(TableReader& br) {
  std::string backend = br.required_string("backend");
  if (const BackendSpec* spec = backend_named(backend)) return spec;
  std::vector<std::string> names;
  for (const auto& b : backends()) names.emplace_back(b.name);
  std::string hint = closest_match(backend, names);
  br.fail("backend", cat("unknown backend '", backend, "'",
                         hint.empty() ? cat(": expected ", backend_names())
                                      : cat(" (did you mean '", hint, "'?)")));
}

// [build]: the backend, the Python packages, the extensions.
void read_build(const SourceText& source, TableReader& br, Manifest& m) {
  m.backend = read_backend(br);
  m.packages = br.strings("packages").value_or(std::vector<std::string>{});
  br.check_lengths("packages", m.packages, kMaxNameBytes);
  for (std::size_t i = 0; i < m.packages.size(); ++i)
    if (!is_dotted_identifier(m.packages[i]))
      fail_at(source, br.element_position("packages", i),
              cat("bad Python package name '", m.packages[i], "'"));
  refer(m, br, "packages", m.packages, TreeReference::Use::Packages, true);
  auto ext_tables = br.tables("extension");
  std::set<std::string> ext_names;
  for (std::size_t i = 0; i < ext_tables.size(); ++i) {
    TableReader er(source, *ext_tables[i], "build.extension",
                   {"name", "sources", "include-dirs", "define-macros", "cxx-flags", "nvcc-flags",
                    "shard", "libraries", "library-dirs", "extra-link-args", "kind"});
    Extension e = read_extension(er);
    refer(m, er, "sources", e.sources, TreeReference::Use::Extensions, false);
    refer(m, er, "include-dirs", e.include_dirs, TreeReference::Use::Extensions, true);
    refer(m, er, "library-dirs", e.library_dirs, TreeReference::Use::Extensions, true);
    if (!ext_names.insert(e.name).second)
      er.fail("name", cat("extension '", e.name, "' is declared twice"));
    m.extensions.push_back(std::move(e));
  }
  const BackendSpec& spec = *m.backend;
  if (spec.builds_extensions && m.extensions.empty())
    br.fail("backend", cat("the ", spec.name, " backend needs at least one [[build.extension]]"));
  // A setuptools manifest may keep its native recipe (for `kiln build --backend native`).
  if (spec.ships_packages_only && !m.extensions.empty())
    br.fail("extension",
            cat("[[build.extension]] applies only to the native backend, not '", spec.name, "'"));
  if (spec.ships_packages_only && m.packages.empty())
    br.fail("backend",
            cat("the ", spec.name, " backend needs 'build.packages': the Python packages to ship"));
}

Manifest parse_manifest_text(const std::string& text, const std::filesystem::path& file,
                             const std::string& display_path,
                             const std::filesystem::path& patches_root) {
  SourceText source{display_path, text};
  toml::table root = parse_toml(source);
  TableReader top(source, root, "", {"package", "source", "patches", "build"});
  Manifest m;
  m.file = file;
  m.display_path = display_path;

  const toml::table* package = top.table("package");
  if (!package) top.fail_missing("package");
  TableReader pkg(source, *package, "package",
                  {"name", "version", "summary", "license", "license-files", "readme",
                   "requires-python", "homepage", "dependencies", "extra-dependencies", "fixture"});
  read_package(source, pkg, m);
  check_file_place(pkg, file, m);

  const toml::table* src = top.table("source");
  if (!src) top.fail_missing("source");
  TableReader srcr(
      source, *src, "source",
      {"pypi", "file", "url", "git", "commit", "submodules", "path", "sha256", "size"});
  m.source = read_source(srcr, file.parent_path());

  if (const toml::table* patches = top.table("patches")) {
    TableReader pr(source, *patches, "patches", {"dir", "series"});
    read_patches(source, pr, file, patches_root, m);
  }

  const toml::table* build = top.table("build");
  if (!build) top.fail_missing("build");
  TableReader br(source, *build, "build", {"backend", "packages", "extension"});
  read_build(source, br, m);
  return m;
}

}  // namespace

std::string Manifest::normalized_name() const {
  return packaging::normalize_name(name);
}

nlohmann::json Manifest::canonical() const {
  using nlohmann::json;
  json src = {{"kind", static_cast<int>(source.kind)}, {"sha256", source.sha256}};
  switch (source.kind) {
    case Source::Kind::Pypi:
      src["pypi"] = packaging::normalize_name(source.pypi);
      src["file"] = source.file;
      break;
    case Source::Kind::Url:
      break;  // the bytes, not where they came from, make the build
    case Source::Kind::Git:
      src["commit"] = source.commit;
      src["submodules"] = source.submodules;
      break;
    case Source::Kind::Local:
      break;  // a directory's tree hash is added by resolve
  }
  json patches_json = json::array();
  for (const auto& p : patches) patches_json.push_back({{"name", p.name}, {"sha256", p.sha256}});
  json exts = json::array();
  for (const auto& e : extensions) {
    exts.push_back({{"name", e.name},
                    {"sources", e.sources},
                    {"include_dirs", e.include_dirs},
                    {"define_macros", e.define_macros},
                    {"cxx_flags", e.cxx_flags},
                    {"nvcc_flags", e.nvcc_flags}});
    // Only when written: a manifest without them keeps the key it had.
    if (!e.libraries.empty()) exts.back()["libraries"] = e.libraries;
    if (!e.library_dirs.empty()) exts.back()["library_dirs"] = e.library_dirs;
    if (!e.extra_link_args.empty()) exts.back()["extra_link_args"] = e.extra_link_args;
    if (!e.kind.empty()) exts.back()["kind"] = e.kind;
    for (const auto& s : e.shards) {
      json shard{{"source", s.source},
                 {"units", s.units},
                 {"index_define", s.index_define},
                 {"count_define", s.count_define}};
      if (s.max_shards > 0)
        shard["max_shards"] = s.max_shards;  // only when written, like the above
      exts.back()["shards"].push_back(std::move(shard));
    }
  }
  return json{{"name", normalized_name()},
              {"display_name", name},
              {"version", version},
              {"summary", summary},
              {"license", license},
              {"license_files", license_files},
              {"readme", readme},
              {"requires_python", requires_python},
              {"homepage", homepage},
              {"extra_dependencies", extra_dependencies},
              {"source", src},
              {"patches", patches_json},
              {"backend", std::string(backend->name)},
              {"packages", packages},
              {"extensions", exts}};
}

Expected<Manifest> parse_manifest(const std::string& text, const std::filesystem::path& file,
                                  const std::string& display_path,
                                  const std::filesystem::path& patches_root) {
  try {
    return parse_manifest_text(text, file, display_path, patches_root);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<Manifest> load_manifest(const std::filesystem::path& file, const std::string& display_path,
                                 const std::filesystem::path& patches_root) {
  auto text = read_file(file);
  if (!text) return Error::bad_input(cat(display_path, ": cannot read manifest"));
  return parse_manifest(*text, file, display_path, patches_root);
}

}  // namespace kiln::manifest
