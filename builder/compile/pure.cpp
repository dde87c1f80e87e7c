#include "compile/pure.h"

#include <algorithm>

#include "compile/backend.h"
#include "core/fs.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

Expected<std::vector<wheel::WheelEntry>> collect_packages(
    const fs::path& tree, const std::vector<std::string>& packages) {
  std::vector<wheel::WheelEntry> out;
  for (const auto& package : packages) {
    std::string rel = package;
    std::replace(rel.begin(), rel.end(), '.', '/');
    fs::path base;
    std::error_code ec;
    for (const fs::path& root : {tree, tree / "src"})
      if (fs::is_directory(root / rel, ec)) {
        base = root;
        break;
      }
    if (base.empty())
      return Error::failed(cat("package '", package, "' is not in the source tree (looked for ",
                               rel, "/ and src/", rel, "/)"));
    for (auto it = fs::recursive_directory_iterator(base / rel, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) return Error::failed(cat("cannot read ", (base / rel).string(), ": ", ec.message()));
      std::string name = it->path().filename().string();
      if (name == "__pycache__") {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_symlink())
        return Error::failed(cat("package file ", it->path().string(), " is a symlink"));
      if (!it->is_regular_file() || it->path().extension() == ".pyc") continue;
      // Streamed into the wheel when it is written: a package file is never held in memory.
      wheel::WheelEntry entry;
      entry.path = it->path().lexically_relative(base).generic_string();
      entry.source = it->path();
      out.push_back(std::move(entry));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const auto& a, const auto& b) { return a.path == b.path; }),
            out.end());
  return out;
}

}  // namespace kiln::compile

namespace kiln::compile {

namespace {

// The pure backend's whole job: the listed packages' files from the tree.
class PureBackend final : public Backend {
 public:
  Expected<PlannedBuild> plan(const BuildRequest& request) const override {
    PlannedBuild planned;
    planned.finish = [tree = request.root / "src",
                      packages = request.manifest->packages]() -> Expected<BuildOutput> {
      BuildOutput out;
      KILN_TRY(out.files, collect_packages(tree, packages));
      return out;
    };
    return planned;
  }
};

}  // namespace

std::unique_ptr<Backend> pure_backend() {
  return std::make_unique<PureBackend>();
}

}  // namespace kiln::compile
