#include "fetch/print_sha256.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"
#include "fetch/url.h"
#include "packaging/name.h"
#include "packaging/specifier.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

namespace kiln::fetch {

namespace fs = std::filesystem;

namespace {

constexpr const char* kSourceForms =
    "expected pypi:NAME==VERSION, an http://, https:// or file:// URL, or a file";

std::uint64_t size_of(const fs::path& file) {
  std::error_code ec;
  auto size = fs::file_size(file, ec);
  return ec ? 0 : static_cast<std::uint64_t>(size);
}

Expected<NewSource> parse_pypi_source(std::string_view text, std::string_view requirement) {
  auto bad = [&] {
    return Error::bad_input(cat("SOURCE '", printable_excerpt(text, 120),
                                "': expected pypi:NAME==VERSION, one exact release"));
  };
  auto parsed = packaging::parse_requirement(requirement);
  if (!parsed) return bad();
  const auto& specs = parsed->specifiers.specifiers();
  if (specs.size() != 1 || specs[0].op != "==" || specs[0].wildcard || specs[0].version.has_local())
    return bad();
  NewSource s;
  s.kind = NewSource::Kind::Pypi;
  s.text = std::string(text);
  s.release = std::move(*parsed);
  return s;
}

// An sdist's name, as pip tells one: NAME-VERSION and an archive suffix pip takes for an sdist.
// The version (as written) when its NAME is `project` (normalised), else nullopt.
std::optional<std::string> sdist_version(std::string_view filename, std::string_view project) {
  static constexpr std::string_view kSuffixes[] = {".tar.gz", ".tgz", ".tar.bz2", ".tbz",
                                                   ".tar.xz", ".txz", ".tar",     ".zip"};
  std::string name = lower(filename);
  std::string_view stem;
  for (std::string_view suffix : kSuffixes)
    if (name.ends_with(suffix)) {
      stem = filename.substr(0, filename.size() - suffix.size());
      break;
    }
  for (std::size_t dash = stem.find('-'); dash != std::string_view::npos;
       dash = stem.find('-', dash + 1))
    if (packaging::normalize_name(stem.substr(0, dash)) == project)
      return std::string(stem.substr(dash + 1));
  return std::nullopt;
}

// Whether `version` (as written in a file name) is the release `source` names.
bool is_release(const NewSource& source, const std::string& version) {
  auto v = packaging::Version::parse(version);
  return v && source.release.specifiers.specifiers()[0].matches(*v, version);
}

// What a project page holds for one release, for picking its sdist and for the errors.
struct ReleaseFiles {
  std::vector<const IndexFile*> sdists;  // of this release
  std::vector<std::string> others;       // this release's other files (wheels)
  std::vector<std::string> versions;     // the versions other sdists are of
  std::vector<std::string> refused;      // names that are no plain file name
};

ReleaseFiles release_files(const std::vector<IndexFile>& files, const NewSource& source) {
  ReleaseFiles out;
  const std::string& project = source.release.normalized;
  for (const auto& f : files) {
    if (!is_safe_filename(f.filename) || f.filename.ends_with(".part")) {
      out.refused.push_back(printable_excerpt(f.filename, 80));
      continue;
    }
    if (auto version = sdist_version(f.filename, project)) {
      if (is_release(source, *version))
        out.sdists.push_back(&f);
      else if (out.versions.empty() || out.versions.back() != *version)  // a .tar.gz and a .zip
        out.versions.push_back(*version);
      continue;
    }
    auto wheel = packaging::parse_wheel_file_name(f.filename);
    if (wheel && wheel->project == project && is_release(source, wheel->version))
      out.others.push_back(f.filename);
  }
  return out;
}

// At most `n` of `names` (the last ones: a page lists older releases first), for a message.
std::string some_of(const std::vector<std::string>& names, std::size_t n) {
  std::vector<std::string> shown(
      names.end() - static_cast<std::ptrdiff_t>(std::min(n, names.size())), names.end());
  return cat(names.size() > n ? "…, " : "", join(shown, ", "));
}

Error no_sdist(const ReleaseFiles& found, const NewSource& source, const std::string& index) {
  std::string what = cat("no sdist of ", source.release.text, " on ", index);
  if (!found.others.empty())
    what += cat("; that release has only ", some_of(found.others, 6));
  else if (!found.versions.empty())
    what += cat("; it has sdists of ", some_of(found.versions, 8));
  else
    what += "; the project's page lists no sdist";
  if (!found.refused.empty())
    what += cat(" (left out ", found.refused.size(), " file", found.refused.size() == 1 ? "" : "s",
                " whose name is not a plain file name: '", found.refused[0], "'",
                found.refused.size() == 1 ? "" : ", …", ")");
  return Error::failed(what);
}

// The one sdist of the release `source` names on the project's page.
Expected<IndexFile> find_sdist(Context& context, const NewSource& source) {
  const std::string index = redact_url(context.index_url);
  KILN_TRY(std::vector<IndexFile> files, read_project_page(context, source.release.name));
  ReleaseFiles found = release_files(files, source);
  if (!found.refused.empty())
    log::warn(cat("index page for '", source.release.name, "': left out ", found.refused.size(),
                  " file name", found.refused.size() == 1 ? "" : "s",
                  " that would not be one plain file name ('", found.refused[0], "')"));
  if (found.sdists.empty()) return no_sdist(found, source, index);
  if (found.sdists.size() > 1) {
    std::vector<std::string> names;
    for (const IndexFile* f : found.sdists) names.push_back(f->filename);
    return Error::failed(cat(source.release.text, " has ", names.size(), " sdists on ", index, ": ",
                             join(names, ", "),
                             "; give the one to pin by its URL (kiln fetch --print-sha256 URL)"));
  }
  const IndexFile& sdist = *found.sdists[0];
  if (!sdist.sha256.empty() && !is_sha256_hex(sdist.sha256))
    return Error::failed(cat("the index ", index, " lists a malformed sha256 for ", sdist.filename,
                             ": '", printable_excerpt(sdist.sha256, 80), "'"));
  return sdist;
}

NewPin pin_of(const Downloader::Unpinned& got, const std::string& name, const std::string& url) {
  return NewPin{name, got.sha256, size_of(got.file.path), url, got.file.path, got.file.downloaded};
}

// The name a URL source's file has in the download cache: the one the url backend gives it
// (url_source.cpp), so that a build of the manifest finds it there.
std::string url_cache_name(const std::string& url) {
  std::string name = url_filename(strip_fragment(url));
  if (!is_safe_filename(name) || name.ends_with(".part")) name = "download";
  return name;
}

}  // namespace

Expected<NewSource> parse_new_source(std::string_view text) {
  if (text.starts_with("pypi:")) return parse_pypi_source(text, text.substr(5));
  NewSource s;
  s.text = std::string(text);
  if (is_http_url(text) || is_file_url(text)) {
    if (is_file_url(text) && file_url_path(text).empty())
      return Error::bad_input(cat("SOURCE '", printable_excerpt(text, 120),
                                  "': only local file:// URLs are supported"));
    s.kind = NewSource::Kind::Url;
    s.url = s.text;
    return s;
  }
  if (text.empty() || text.find("://") != std::string_view::npos)
    return Error::bad_input(cat("SOURCE '", printable_excerpt(text, 120), "': ", kSourceForms));
  std::error_code ec;
  if (text.find('/') == std::string_view::npos && !fs::exists(fs::path(text), ec))
    return Error::bad_input(cat("SOURCE '", printable_excerpt(text, 120), "' names no file (",
                                kSourceForms,
                                "); package names and --print-sha256 do not go together"));
  s.kind = NewSource::Kind::Path;
  s.path = absolute_path(fs::path(text));
  return s;
}

Expected<NewPin> fetch_new_source(Context& context, const NewSource& source) {
  Downloader& downloader = context.downloader;
  if (source.kind == NewSource::Kind::Path) {
    const std::string name = source.path.filename().string();
    KILN_TRY(auto got, downloader.import_unpinned(source.path, name));
    return pin_of(got, name, "");
  }
  if (source.kind == NewSource::Kind::Url) {
    const std::string url = strip_fragment(source.url);
    const std::string name = url_cache_name(url);
    if (is_file_url(url)) {
      KILN_TRY(auto got, downloader.import_unpinned(file_url_path(url), name));
      return pin_of(got, name, url);
    }
    KILN_TRY(auto got, downloader.fetch_unpinned(url, name, std::nullopt));
    return pin_of(got, name, url);
  }
  if (downloader.offline())
    return Error::bad_input(cat("--offline: ", source.text, " has no sha256 to find it by"));
  KILN_TRY(IndexFile sdist, find_sdist(context, source));
  if (sdist.sha256.empty()) {
    KILN_TRY(auto got, downloader.fetch_unpinned(sdist.url, sdist.filename, sdist.size));
    return pin_of(got, sdist.filename, sdist.url);
  }
  KILN_TRY(CachedFile file, downloader.fetch(sdist.url, sdist.filename, sdist.sha256, sdist.size));
  return NewPin{sdist.filename, sdist.sha256, size_of(file.path),
                sdist.url,      file.path,    file.downloaded};
}

}  // namespace kiln::fetch
