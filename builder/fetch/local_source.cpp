// Local sources: a directory used as it is, or an archive copied into the download cache and
// verified there (so the bytes later stages read are the bytes that were verified).
#include "core/fs.h"
#include "core/strings.h"
#include "fetch/backends.h"

namespace kiln::fetch {

namespace {

class LocalSource final : public Source {
 public:
  LocalSource(manifest::Source source, Context& context)
      : source_(std::move(source)), context_(context) {}

  Expected<Fetched> fetch(const std::filesystem::path&) override {
    const auto& path = source_.path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      KILN_TRY(std::string tree, tree_sha256(path));
      return Fetched{path, true, tree, false};
    }
    if (!fs::exists(path, ec))
      return Error::failed(cat("local source ", path.string(), " does not exist"));
    if (source_.sha256.empty())
      return Error::bad_input(cat("local archive ", path.string(), " has no sha256 pin"));
    KILN_TRY(CachedFile file,
             context_.downloader.import_file(path, path.filename().string(), source_.sha256));
    return Fetched{file.path, false, source_.sha256, false};
  }

 private:
  manifest::Source source_;
  Context& context_;
};

}  // namespace

std::unique_ptr<Source> make_local_source(const manifest::Source& source, Context& context) {
  return std::make_unique<LocalSource>(source, context);
}

}  // namespace kiln::fetch
