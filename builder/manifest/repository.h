// The manifests directory: every package manifest and target, and the selection rules (a
// requirement as pip reads it: "name" = the newest manifest, "name==1.7", "name>=1.6,<1.7" = the
// newest that matches; no names = the newest of every package but test fixtures).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/expected.h"
#include "manifest/build_env.h"
#include "manifest/manifest.h"
#include "manifest/target.h"
#include "packaging/specifier.h"

namespace kiln::manifest {

class Repository {
 public:
  // Loads and validates every manifests/<name>/<version>.toml under `dir`; patches resolve under
  // `patches_root`. `display_root` is how messages name `dir`. A manifest that fails to load (or
  // repeats another's name and version) does not fail the load: it is kept as broken(), and
  // selecting its package gives its located error.
  static Expected<Repository> load(const std::filesystem::path& dir,
                                   const std::filesystem::path& patches_root,
                                   const std::string& display_root);

  const std::filesystem::path& dir() const { return dir_; }
  // Every manifest, sorted by (normalised name, version).
  const std::vector<Manifest>& manifests() const { return manifests_; }

  // The newest manifest whose version the requirement's specifiers match, as pip would pick it
  // from these versions ("causal-conv1d" -> the newest; "causal-conv1d==1.7" -> 1.7.0;
  // "causal-conv1d~=1.6.0" -> the newest 1.6.x). A local label ("==1.7.0+cu130torch2.11") is
  // left out here: it names the target, which resolve checks.
  Expected<const Manifest*> select(const std::string& spec) const;
  Expected<const Manifest*> select(const packaging::Requirement& requirement) const;
  // The newest manifest of every package but test fixtures (`fixture = true`); with a broken
  // manifest anywhere, its error.
  Expected<std::vector<const Manifest*>> newest_of_each() const;

  // Manifests that failed to load: the package they are filed under (its normalised directory
  // name), and why.
  struct Broken {
    std::string package;
    std::string version;  // the file's stem
    Error error;
  };
  const std::vector<Broken>& broken() const { return broken_; }

  // A target by name (manifests/targets/<name>.toml) or path (contains '/' or ends in .toml).
  // "default" falls back to the default target built into kiln when the file is absent.
  Expected<Target> target(const std::string& name_or_path) const;
  std::vector<std::string> target_names() const;

  // The setuptools backend's pins: tools/setuptools-env.toml, else the copy built into kiln.
  Expected<BuildEnvPins> build_env() const;

 private:
  std::filesystem::path dir_;
  std::string display_root_;
  std::vector<Manifest> manifests_;
  std::vector<Broken> broken_;
};

// The text of manifests/targets/default.toml as it was when kiln was built.
extern const char* const kEmbeddedDefaultTarget;

}  // namespace kiln::manifest
