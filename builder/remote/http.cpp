// An HTTP remote cache: each entry at <base URL><name>, read with GET (404: a miss) and written
// with PUT, with "Authorization: Bearer <token>" when there is a token. nginx's dav module
// (dav_methods PUT; create_full_put_path on) is such a server; so is any cache that serves what
// was PUT at the same path (docs/scale.md). Short timeouts: a remote that is down or slow turns
// off for the run instead of slowing every job: 5 s to connect, 15 s below 1 KB/s, and a deadline
// for the whole request (Config::deadline, KILN_REMOTE_DEADLINE). A GET's answer is bounded by the
// caller's max_bytes (a Content-Length over it refused before the body is read); SIGINT/SIGTERM
// end a request within a second (curl_http.cpp's progress callback).
#include <memory>

#include "core/strings.h"
#include "fetch/http.h"
#include "remote/remote.h"

namespace kiln::remote {

namespace {

class HttpRemote final : public cache::Remote {
 public:
  HttpRemote(std::string base, std::string token, std::chrono::milliseconds deadline)
      : base_(std::move(base)) {
    if (!base_.ends_with('/')) base_ += '/';
    if (!token.empty()) headers_.emplace_back("Authorization", "Bearer " + token);
    options_.connect_timeout_s = 5;
    options_.low_speed_limit = 1024;
    options_.low_speed_time_s = 15;
    options_.max_redirects = 3;
    options_.timeout_ms = static_cast<long>(deadline.count());
  }

  std::string describe() const override { return base_; }

  Expected<cache::Fetched> get(const std::string& name, std::uint64_t max_bytes) override {
    fetch::HttpResponse r = client(max_bytes)->get(base_ + name, headers_);
    if (r.transport == fetch::Transport::Ok && r.status == 404) return cache::Fetched::missing();
    if (r.transport == fetch::Transport::TooLarge) return cache::Fetched::too_large(r.error);
    if (r.transport == fetch::Transport::Interrupted) return Error::interrupted();
    if (!r.ok()) return Error::failed(cat("GET ", name, ": ", r.describe()));
    return cache::Fetched::found(std::move(r.body));
  }

  Expected<void> put(const std::string& name, std::string_view bytes) override {
    fetch::HttpResponse r = client(kMaxPutAnswer)->put(base_ + name, bytes, headers_);
    if (r.transport == fetch::Transport::Interrupted) return Error::interrupted();
    if (!r.ok()) return Error::failed(cat("PUT ", name, ": ", r.describe()));
    return {};
  }

 private:
  static constexpr std::uint64_t kMaxPutAnswer = std::uint64_t{64} << 10;

  // A client whose answers are at most `max_bytes` (one per request: the bound is the request's).
  std::unique_ptr<fetch::HttpClient> client(std::uint64_t max_bytes) const {
    fetch::CurlOptions options = options_;
    options.max_text_bytes = static_cast<std::size_t>(max_bytes);
    return fetch::make_curl_client(options);
  }

  std::string base_;
  fetch::Headers headers_;
  fetch::CurlOptions options_;
};

}  // namespace

std::unique_ptr<cache::Remote> http_remote(const Config& config) {
  return std::make_unique<HttpRemote>(config.url, config.token, config.deadline);
}

}  // namespace kiln::remote
