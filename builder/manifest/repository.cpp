#include "manifest/repository.h"

#include <algorithm>
#include <set>

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/limits.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"

namespace kiln::manifest {

namespace fs = std::filesystem;

Expected<Repository> Repository::load(const fs::path& dir, const fs::path& patches_root,
                                      const std::string& display_root) {
  Repository repo;
  repo.dir_ = dir;
  repo.display_root_ = display_root;
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Error::bad_input(cat("manifests directory '", display_root, "' does not exist"));
  std::vector<fs::path> files;
  for (const auto& pkg_dir : fs::directory_iterator(dir, ec)) {
    if (!pkg_dir.is_directory() || pkg_dir.path().filename() == "targets" ||
        pkg_dir.path().filename() == "tools")
      continue;
    for (const auto& entry : fs::directory_iterator(pkg_dir.path(), ec))
      if (entry.is_regular_file() && entry.path().extension() == ".toml")
        files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  std::map<std::pair<std::string, std::string>, std::string> seen;  // (name, version) -> file
  for (const auto& file : files) {
    std::string display = cat(display_root, "/", fs::relative(file, dir).string());
    std::string package = packaging::normalize_name(file.parent_path().filename().string());
    auto loaded = load_manifest(file, display, patches_root);
    if (!loaded) {
      repo.broken_.push_back({package, file.stem().string(), std::move(loaded).error()});
      continue;
    }
    Manifest& m = *loaded;
    auto key = std::make_pair(m.normalized_name(), m.version);
    if (auto it = seen.find(key); it != seen.end()) {
      auto text = read_file(file);
      repo.broken_.push_back(
          {package, file.stem().string(),
           located_error(SourceText{display, text ? *text : std::string()}, m.name_at,
                         cat("duplicate package '", m.name, "' ", m.version,
                             ": already declared in ", it->second))});
      continue;
    }
    seen.emplace(key, display);
    repo.manifests_.push_back(std::move(m));
  }
  std::sort(repo.manifests_.begin(), repo.manifests_.end(),
            [](const Manifest& a, const Manifest& b) {
              if (a.normalized_name() != b.normalized_name())
                return a.normalized_name() < b.normalized_name();
              return packaging::compare_versions(a.version, b.version) < 0;
            });
  return repo;
}

Expected<const Manifest*> Repository::select(const std::string& spec) const {
  KILN_TRY(packaging::Requirement requirement, packaging::parse_requirement(spec));
  return select(requirement);
}

Expected<const Manifest*> Repository::select(const packaging::Requirement& requirement) const {
  const std::string& normalized = requirement.normalized;
  packaging::SpecifierSet specs = requirement.specifiers.without_local_labels();
  // A broken manifest of this package: its error, unless its version (the file's stem) is one the
  // specifiers leave out (without specifiers, the broken one might be the newest).
  for (const auto& b : broken_) {
    if (b.package != normalized) continue;
    auto v = packaging::Version::parse(b.version);
    bool left_out =
        v && !std::all_of(specs.specifiers().begin(), specs.specifiers().end(),
                          [&](const packaging::Specifier& s) { return s.matches(*v, b.version); });
    if (!left_out) return b.error;
  }
  std::vector<std::string> versions;
  for (const auto& m : manifests_)
    if (m.normalized_name() == normalized) versions.push_back(m.version);
  if (versions.empty()) {
    std::vector<std::string> names;
    for (const auto& m : manifests_) names.push_back(m.normalized_name());
    std::string hint = closest_match(normalized, names);
    return Error::bad_input(
        cat("no manifest for package '", requirement.name, "' in ", display_root_,
            hint.empty() ? std::string() : cat(" (did you mean '", hint, "'?)")));
  }
  std::vector<std::string> matching = specs.filter(versions);
  if (matching.empty())
    return Error::bad_input(cat("no manifest for ", requirement.name, requirement.specifiers.str(),
                                " (have: ", join(versions, ", "), ")"));
  const Manifest* found = nullptr;  // sorted: the last that matches is the newest
  for (const auto& m : manifests_)
    if (m.normalized_name() == normalized && m.version == matching.back()) found = &m;
  return found;
}

Expected<std::vector<const Manifest*>> Repository::newest_of_each() const {
  if (!broken_.empty()) return broken_.front().error;
  std::vector<const Manifest*> out;
  for (const auto& m : manifests_) {
    if (m.fixture) continue;
    if (!out.empty() && out.back()->normalized_name() == m.normalized_name())
      out.back() = &m;
    else
      out.push_back(&m);
  }
  return out;
}

std::vector<std::string> Repository::target_names() const {
  std::set<std::string> names{"default"};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_ / "targets", ec))
    if (entry.path().extension() == ".toml") names.insert(entry.path().stem().string());
  return {names.begin(), names.end()};
}

Expected<BuildEnvPins> Repository::build_env() const {
  fs::path file = dir_ / "tools" / "setuptools-env.toml";
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    return parse_build_env(kEmbeddedBuildEnv, "<built-in setuptools-env.toml>");
  auto text = read_file(file);
  std::string display = cat(display_root_, "/tools/setuptools-env.toml");
  if (!text) return Error::bad_input(cat(display, ": cannot read"));
  return parse_build_env(*text, display);
}

Expected<Target> Repository::target(const std::string& name_or_path) const {
  bool is_path =
      name_or_path.find('/') != std::string::npos ||
      (name_or_path.size() > 5 && name_or_path.substr(name_or_path.size() - 5) == ".toml");
  if (is_path) {
    std::error_code ec;
    if (!fs::is_regular_file(name_or_path, ec))
      return Error::bad_input(cat("target file '", name_or_path, "' does not exist"));
    return load_target(name_or_path, name_or_path);
  }
  if (name_or_path.size() > kMaxTargetNameBytes)
    return Error::bad_input(cat("bad target name '", printable_excerpt(name_or_path),
                                "': longer than ", kMaxTargetNameBytes, " bytes"));
  if (!is_valid_target_name(name_or_path))
    return Error::bad_input(cat("bad target name '", name_or_path, "'"));
  fs::path file = dir_ / "targets" / (name_or_path + ".toml");
  std::error_code ec;
  if (fs::is_regular_file(file, ec))
    return load_target(file, cat(display_root_, "/targets/", name_or_path, ".toml"));
  if (name_or_path == "default")
    return parse_target(kEmbeddedDefaultTarget, "default", "<built-in default target>");
  std::vector<std::string> names = target_names();
  std::string hint = closest_match(name_or_path, names);
  constexpr std::size_t kShown = 20;
  std::string more = names.size() > kShown ? cat(" and ", names.size() - kShown, " more") : "";
  names.resize(std::min(names.size(), kShown));
  return Error::bad_input(
      cat("no target '", name_or_path, "' in ", display_root_, "/targets",
          hint.empty() ? std::string() : cat(" (did you mean '", hint, "'?)"),
          "; the targets: ", join(names, ", "), more,
          "; `kiln target init --python PYTHON` (or `--torch VERSION`) writes one"));
}

}  // namespace kiln::manifest
