// PyPI sources: the pinned file found on the project's page of the configured index.
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/backends.h"
#include "fetch/simple_index.h"
#include "fetch/url.h"
#include "packaging/name.h"

namespace kiln::fetch {

namespace {

class PypiSource final : public Source {
 public:
  PypiSource(manifest::Source source, Context& context)
      : source_(std::move(source)), context_(context) {}

  Expected<Fetched> fetch(const std::filesystem::path&) override {
    return fetch_index_file(context_, source_.pypi, source_.file, source_.sha256);
  }

 private:
  manifest::Source source_;
  Context& context_;
};

}  // namespace

std::unique_ptr<Source> make_pypi_source(const manifest::Source& source, Context& context) {
  return std::make_unique<PypiSource>(source, context);
}

Expected<std::vector<IndexFile>> read_project_page(Context& context, const std::string& project) {
  if (!packaging::is_valid_project_name(project))
    return Error::bad_input(cat("bad project name '", project, "'"));
  std::string index = context.index_url;
  if (index.empty() || index.back() != '/') index += '/';
  std::string page_url = cat(index, packaging::normalize_name(project), "/");
  KILN_TRY(HttpResponse page, context.downloader.get_text(page_url, {{"Accept", kSimpleAccept}}));
  if (page.status == 404)
    return Error::failed(cat("project '", project, "' is not on the index ", redact_url(index),
                             " (HTTP 404 for ", redact_url(page_url), ")"));
  if (!page.ok())
    return Error::failed(cat("cannot read ", redact_url(page_url), ": ", page.describe()));
  std::string base = page.final_url.empty() ? page_url : page.final_url;
  LeftOut left_out;
  auto files = parse_project_page(page.body, page.header("content-type"), base, &left_out);
  if (left_out.count > 0)
    log::warn(cat("index page ", redact_url(base), ": left out ", left_out.count, " link",
                  left_out.count == 1 ? " that is" : "s that are", " not http(s) (", left_out.first,
                  left_out.count == 1 ? "" : ", …", ")"));
  return files;
}

Expected<Fetched> fetch_index_file(Context& context, const std::string& project,
                                   const std::string& filename, const std::string& sha256) {
  Downloader& downloader = context.downloader;
  if (!is_sha256_hex(sha256))
    return Error::bad_input(cat("bad sha256 '", sha256, "' for ",
                                filename.empty() ? project : filename,
                                ": expected 64 lowercase hexadecimal digits"));
  if (auto cached = downloader.find_cached(sha256, filename))
    return Fetched{*cached, false, sha256, false};
  if (downloader.offline())
    return downloader.offline_error(filename.empty() ? project : filename, sha256);
  if (!packaging::is_valid_project_name(project))
    return Error::bad_input(cat("bad project name '", project, "'"));

  std::string shown_index = redact_url(context.index_url);
  KILN_TRY(std::vector<IndexFile> files, read_project_page(context, project));

  const IndexFile* found = nullptr;
  for (const auto& f : files) {
    bool match = filename.empty() ? f.sha256 == sha256
                                  : (f.filename == filename || url_filename(f.url) == filename);
    if (match) {
      found = &f;
      break;
    }
  }
  if (!found) {
    if (filename.empty())
      return Error::failed(
          cat("no file of project '", project, "' on ", shown_index, " has sha256 ", sha256));
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.filename);
    std::string guess = closest_match(filename, names);
    return Error::failed(cat(filename, " is not on ", shown_index, " for project '", project, "'",
                             guess.empty() ? std::string() : cat("; did you mean ", guess, "?")));
  }
  std::string name = filename.empty() ? found->filename : filename;
  if (!found->sha256.empty() && found->sha256 != sha256)
    return Error::failed(cat("sha256 mismatch for ", name, ": the manifest pins ", sha256,
                             ", the index ", shown_index, " lists ", found->sha256));
  KILN_TRY(CachedFile file, downloader.fetch(found->url, name, sha256, found->size));
  return Fetched{file.path, false, sha256, file.downloaded};
}

}  // namespace kiln::fetch
