// An HTTP remote cache: each entry at <base URL><name>, read with GET (404: a miss) and written
// with PUT, with "Authorization: Bearer <token>" when there is a token. nginx's dav module
// (dav_methods PUT; create_full_put_path on) is such a server; so is any cache that serves what
// was PUT at the same path (docs/scale.md). Short timeouts: a remote that is down or slow turns
// off for the run instead of slowing every job.
#include <memory>

#include "core/strings.h"
#include "fetch/http.h"
#include "remote/remote.h"

namespace kiln::remote {

namespace {

class HttpRemote final : public cache::Remote {
 public:
  HttpRemote(std::string base, std::string token) : base_(std::move(base)) {
    if (!base_.ends_with('/')) base_ += '/';
    if (!token.empty()) headers_.emplace_back("Authorization", "Bearer " + token);
    fetch::CurlOptions options;
    options.connect_timeout_s = 5;
    options.low_speed_limit = 1024;
    options.low_speed_time_s = 15;
    options.max_redirects = 3;
    options.max_text_bytes = std::size_t{2} << 30;  // the largest entry: a wheel
    client_ = fetch::make_curl_client(options);
  }

  std::string describe() const override { return base_; }

  Expected<std::optional<std::string>> get(const std::string& name) override {
    fetch::HttpResponse r = client_->get(base_ + name, headers_);
    if (r.transport == fetch::Transport::Ok && r.status == 404) return std::nullopt;
    if (!r.ok()) return Error::failed(cat("GET ", name, ": ", r.describe()));
    return std::optional<std::string>(std::move(r.body));
  }

  Expected<void> put(const std::string& name, std::string_view bytes) override {
    fetch::HttpResponse r = client_->put(base_ + name, bytes, headers_);
    if (!r.ok()) return Error::failed(cat("PUT ", name, ": ", r.describe()));
    return {};
  }

 private:
  std::string base_;
  fetch::Headers headers_;
  std::unique_ptr<fetch::HttpClient> client_;
};

}  // namespace

std::unique_ptr<cache::Remote> http_remote(const Config& config) {
  return std::make_unique<HttpRemote>(config.url, config.token);
}

}  // namespace kiln::remote
