// HTTP GETs behind a small interface: libcurl for real (curl_http.cpp), an in-memory fake in tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/expected.h"

namespace kiln::fetch {

using Headers = std::vector<std::pair<std::string, std::string>>;

// How a transfer ended, apart from its HTTP status.
enum class Transport {
  Ok,             // a complete HTTP answer arrived (whatever its status)
  ConnectFailed,  // no connection: refused, unreachable, name not resolved
  TimedOut,       // the connection timed out, or the transfer stayed too slow for too long
  Broken,         // the answer broke off (fewer bytes than announced, connection reset)
  Failed,         // anything else (TLS, unsupported URL, too many redirects, a local write error)
  TooLarge,       // the body would take the file past its size limit (download()), or is larger
                  // than max_text_bytes (get(), put()): announced or sent
  Interrupted,    // SIGINT/SIGTERM arrived (core/interrupt.h)
};

struct HttpResponse {
  Transport transport = Transport::Ok;
  std::string error;        // why, when transport != Ok (one line)
  long status = 0;          // HTTP status of the last answer; 0 when none arrived
  std::string final_url;    // after redirects
  Headers headers;          // of the last answer; names in lowercase
  std::string body;         // get() only
  std::uint64_t bytes = 0;  // body bytes received (download(): written to the file)

  std::string header(std::string_view name) const;  // "" when absent; `name` in any case
  bool ok() const { return transport == Transport::Ok && status >= 200 && status < 300; }
  // Worth another attempt: connection failures, timeouts, broken answers, HTTP 5xx and 429.
  bool retryable() const;
  // "HTTP 404", "connection failed: <why>", ...: for messages.
  std::string describe() const;
};

class HttpClient {
 public:
  virtual ~HttpClient() = default;

  // GET `url` into `file`. With `offset` > 0 it asks for "Range: bytes=<offset>-": a 206 answer
  // whose Content-Range starts at `offset` is written at `offset` (the file is cut there first);
  // any other 2xx answer replaces the file's content (a 206 with another range empties the file
  // and reports Transport::Broken, so the next attempt starts over). A non-2xx body is never
  // written, and the file is created only when a 2xx answer arrives. What arrived before a broken
  // transfer stays in the file, for the next attempt to resume. The file never grows past
  // `max_bytes`: an answer that announces or sends more fails with Transport::TooLarge.
  virtual HttpResponse download(const std::string& url, const std::filesystem::path& file,
                                std::uint64_t offset, std::uint64_t max_bytes) = 0;

  // GET a small text (an index page) into `body`, with extra request headers such as Accept.
  virtual HttpResponse get(const std::string& url, const Headers& request_headers) = 0;
  // PUT `body` at `url` (no redirects followed: a body is not sent on to another place); the
  // answer's body is read like get()'s.
  virtual HttpResponse put(const std::string& url, std::string_view body,
                           const Headers& request_headers) = 0;

  // Called while download() runs with the body bytes this answer has brought so far and the size
  // it announced (0: unknown). Empty: nothing is called.
  using Progress = std::function<void(std::uint64_t received, std::uint64_t total)>;
  void set_progress(Progress progress) { progress_ = std::move(progress); }

 protected:
  Progress progress_;
};

struct CurlOptions {
  long connect_timeout_s = 30;
  long low_speed_limit = 1024;  // bytes per second; slower than this ...
  long low_speed_time_s = 60;   // ... for this long aborts the transfer (Transport::TimedOut)
  long max_redirects = 10;      // http and https only
  long timeout_ms = 0;          // the whole request, however fast it moves (0: no limit)
  // get(), put(): larger answers fail (TooLarge), a Content-Length over it before the body is read
  std::size_t max_text_bytes = 64u << 20;
};

// The places systems keep their CA bundle (Debian/Ubuntu first, then RHEL, SUSE, Alpine, ...).
extern const std::vector<std::string> kSystemCaBundles;
// The CA bundle file TLS is verified with, as pip finds it: $PIP_CERT, $REQUESTS_CA_BUNDLE or
// $SSL_CERT_FILE (the first set; an error when it is not a file), else the first of `candidates`
// that exists, else "" (libcurl's and OpenSSL's compiled-in default). kiln's portable build has no
// compiled-in place that every system holds, so it is always looked for.
Expected<std::string> ca_bundle_file(const std::vector<std::string>& candidates = kSystemCaBundles);

// The libcurl client: ca_bundle_file (SSL_CERT_DIR: a CA directory), proxies from the environment
// (libcurl's http_proxy, https_proxy, no_proxy), User-Agent "kiln/<version>".
std::unique_ptr<HttpClient> make_curl_client(const CurlOptions& options = {});

std::string user_agent();  // "kiln/0.1.0"

}  // namespace kiln::fetch
