// URL sources: an archive at an http(s):// or file:// URL, pinned by sha256.
#include "core/strings.h"
#include "fetch/backends.h"
#include "fetch/url.h"

namespace kiln::fetch {

namespace {

class UrlSource final : public Source {
 public:
  UrlSource(manifest::Source source, Context& context)
      : source_(std::move(source)), context_(context) {}

  Expected<Fetched> fetch(const std::filesystem::path&) override {
    // The cache keeps the URL's file name: later stages tell .tar.gz from .zip by it.
    std::string name = url_filename(strip_fragment(source_.url));
    if (!is_safe_filename(name) || (name.size() >= 5 && name.substr(name.size() - 5) == ".part"))
      name = "download";
    // The manifest's own URL (the user's file): it may name a local file.
    KILN_TRY(CachedFile file,
             context_.downloader.fetch(strip_fragment(source_.url), name, source_.sha256,
                                       source_.size, UrlFrom::User));
    return Fetched{file.path, false, source_.sha256, file.downloaded};
  }

 private:
  manifest::Source source_;
  Context& context_;
};

}  // namespace

std::unique_ptr<Source> make_url_source(const manifest::Source& source, Context& context) {
  return std::make_unique<UrlSource>(source, context);
}

}  // namespace kiln::fetch
