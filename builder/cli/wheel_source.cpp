#include "cli/wheel_source.h"

#include "core/error.h"
#include "core/fs.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "fetch/http.h"
#include "fetch/url.h"
#include "pipeline/sources.h"

namespace kiln::cli {

namespace fs = std::filesystem;

fs::path wheel_file(const std::string& given, cache::Store& store, bool offline,
                    const std::string& index_url) {
  if (!fetch::is_http_url(given)) return absolute_path(given);
  std::string url = fetch::strip_fragment(given), name = fetch::url_filename(url);
  if (!name.ends_with(".whl") || !fetch::is_safe_filename(name))
    raise(Error::bad_input(cat(terminal_field(given, 300), " does not name a .whl file")));
  auto fetching = pipeline::Fetching::create(store, offline, index_url).value();
  fetch::Downloader& downloader = fetching->context().downloader;
  if (std::string f = fetch::fragment(given); f.starts_with("sha256=")) {
    std::string sha256 = lower(f.substr(7));
    if (sha256.size() != 64 || !is_hex(sha256))
      raise(Error::bad_input(cat(terminal_field(given, 300), ": a malformed #sha256=")));
    return downloader.fetch(url, name, sha256).value().path;
  }
  return downloader.fetch_unpinned(url, name, std::nullopt).value().file.path;
}

std::optional<std::string> fetch_small_file(const std::string& url, std::uint64_t max_bytes) {
  fetch::CurlOptions options;
  options.max_text_bytes = max_bytes;
  options.timeout_ms = 120 * 1000;  // a deadline, not only a low-speed limit
  fetch::HttpResponse r = fetch::make_curl_client(options)->get(url, {});
  if (r.transport == fetch::Transport::Ok && (r.status == 404 || r.status == 410))
    return std::nullopt;
  if (!r.ok())
    raise(Error::failed(cat("cannot read ", terminal_field(url, 300), ": ", r.describe())));
  return std::move(r.body);
}

}  // namespace kiln::cli
