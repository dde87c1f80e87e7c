// check_tree: the paths a manifest names, in the patched source tree, before anything is built.
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/manifest.h"

namespace kiln::manifest {

namespace fs = std::filesystem;

namespace {

bool reads(const Manifest& m, TreeReference::Use use) {
  switch (use) {
    case TreeReference::Use::Always:
      return true;
    case TreeReference::Use::Extensions:
      return m.backend->builds_extensions;
    case TreeReference::Use::Packages:
      return !m.backend->needs_build_env;  // the package's own build finds its packages
  }
  return true;
}

// Whether `rel` is in `tree` as what the reference wants (links followed: the copy kept only those
// resolving inside the tree).
bool present(const fs::path& tree, const TreeReference& ref) {
  std::string rel = ref.path;
  if (ref.use == TreeReference::Use::Packages) std::replace(rel.begin(), rel.end(), '.', '/');
  for (const fs::path& root : {tree, tree / "src"}) {
    struct stat st {};
    if (::stat((root / rel).c_str(), &st) == 0 &&
        (ref.directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)))
      return true;
    if (ref.use != TreeReference::Use::Packages) break;  // only packages may live under src/
  }
  return false;
}

}  // namespace

Expected<void> check_tree(const Manifest& m, const fs::path& tree) {
  for (const auto& ref : m.tree_references) {
    if (!reads(m, ref.use) || present(tree, ref)) continue;
    std::string what = ref.directory ? "a directory" : "a file";
    if (ref.use == TreeReference::Use::Packages) what = "a package directory (in the tree or src/)";
    std::string message =
        cat("'", ref.path, "' (", ref.key, ") is not ", what, " of the patched source tree: the ",
            "source does not hold it and no patch makes it; `kiln prepare ", m.name,
            "==", m.version, " -o DIR` shows the tree");
    auto text = read_file(m.file);
    if (!text || ref.at.line == 0) return Error::bad_input(cat(m.display_path, ": ", message));
    return located_error({m.display_path, *text}, ref.at, message);
  }
  return {};
}

}  // namespace kiln::manifest
