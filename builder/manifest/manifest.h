// Package manifests: manifests/<name>/<version>.toml. docs/manifest.md documents the format.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "manifest/backend.h"
#include "manifest/diagnostic.h"

namespace kiln::manifest {

struct Source {
  enum class Kind { Pypi, Url, Git, Local };
  Kind kind = Kind::Pypi;
  std::string pypi;                     // project name on the index (Pypi)
  std::string file;                     // file name on the index (Pypi)
  std::string url;                      // Url, Git
  std::string commit;                   // Git: 40 hex digits
  std::vector<std::string> submodules;  // Git: the submodules to check out (none by default)
  std::filesystem::path path;           // Local: archive or directory, absolute
  std::string sha256;                 // Pypi, Url, Local archive: required; Local directory: empty
  std::optional<std::uint64_t> size;  // Url: the archive's size in bytes, when given
};

struct Patch {
  std::string name;            // as written in the manifest
  std::filesystem::path path;  // absolute
  std::string sha256;          // of its bytes, read at load time
};

// A source whose explicit instantiations (its "units") can be compiled as several translation
// units: the k-th of n compiles with -D<index_define>=k -D<count_define>=n and holds the units u
// with u % n == k (a patch or the package itself provides this); without the defines it holds all.
struct Shardable {
  std::string source;  // one of the extension's sources
  int units = 0;       // how many units it holds (kiln uses at most this many shards)
  int max_shards = 0;  // at most this many shards, when written (each repeats the front end)
  std::string index_define;
  std::string count_define;
};

struct Extension {
  std::string name;  // module name, e.g. "causal_conv1d_cuda"
  std::vector<std::string> sources;
  std::vector<Shardable> shards;  // [[build.extension.shard]]
  std::vector<std::string> include_dirs;
  std::vector<std::string> define_macros;  // "NAME" or "NAME=VALUE"
  std::vector<std::string> cxx_flags;
  std::vector<std::string> nvcc_flags;
  // Linking, like setuptools' Extension: -l<name> for each library, -L<tree>/<dir> for each
  // library directory, then the extra arguments as they are.
  std::vector<std::string> libraries;
  std::vector<std::string> library_dirs;  // relative paths inside the source tree
  std::vector<std::string> extra_link_args;
  // "cuda" (nvcc for .cu sources, CUDA's headers and torch's CUDA libraries), "cxx" (C++ only:
  // no CUDA headers or libraries), or "" when not written: the same as "cuda".
  std::string kind;
  bool cuda() const { return kind != "cxx"; }
};

// A path the manifest names inside the package's source tree, and where it is written: checked
// against the patched tree before anything is built (check_tree).
struct TreeReference {
  enum class Use {
    Always,      // license-files, readme
    Extensions,  // a [[build.extension]]'s sources, include-dirs, library-dirs: native builds
    Packages,    // build.packages (as a/b for a.b, in the tree or its src/): native and pure builds
  };
  std::string path;
  bool directory = false;
  Use use = Use::Always;
  std::string key;  // as the manifest spells it: "build.extension.sources"
  Position at;
};

// A Python identifier or C macro name: [A-Za-z_][A-Za-z0-9_]* (ASCII).
bool is_identifier(std::string_view s);

struct Manifest {
  std::filesystem::path file;  // absolute path of the manifest
  std::string display_path;    // as shown in messages
  Position name_at;            // where package.name is written

  std::string name;  // as written (display form)
  std::string version;
  std::string summary;
  std::string license;
  std::string requires_python;
  std::string homepage;
  std::vector<std::string> license_files;  // paths in the source tree
  std::string readme;  // path in the source tree: the long description (else the sdist's PKG-INFO)

  Source source;
  std::vector<Patch> patches;

  const BackendSpec* backend = &default_backend();  // [build] backend (manifest/backend.h)
  std::vector<Extension> extensions;                // [[build.extension]]: the native recipe
  std::vector<std::string> packages;                // Python packages to ship (native, pure)
  // Requirements kiln adds to the sdist's own (its PKG-INFO's), each for a reason the manifest
  // states; a bare torch requirement is pinned by kiln to the target's minor.
  std::vector<std::string> extra_dependencies;
  // [package] fixture = true: a test fixture (kiln-demo), built only when named, never in the
  // default set (no package names, --all-versions without names). Not part of the build key.
  bool fixture = false;
  std::vector<TreeReference> tree_references;

  std::string normalized_name() const;
  // Every field that can change the built bytes, in a fixed order (comments, layout and the
  // manifest's location are not part of it). Patch bytes enter through their sha256.
  nlohmann::json canonical() const;
};

// Whether every path the manifest names that a build with its backend reads is in `tree` (the
// patched source tree): else the error located at the first that is not, saying what to do.
Expected<void> check_tree(const Manifest& m, const std::filesystem::path& tree);

// Parses and validates one manifest file. `display_path` is how messages name the file.
// `patches_root` is the patches/ directory (patches resolve to patches/<name>/<version>/<file>).
Expected<Manifest> load_manifest(const std::filesystem::path& file, const std::string& display_path,
                                 const std::filesystem::path& patches_root);
// The same from text (tests, fuzzing).
Expected<Manifest> parse_manifest(const std::string& text, const std::filesystem::path& file,
                                  const std::string& display_path,
                                  const std::filesystem::path& patches_root);

}  // namespace kiln::manifest
