// The libcurl HttpClient: one easy handle per request (so one client serves many threads).
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/fault.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/strings.h"
#include "fetch/http.h"

namespace kiln::fetch {

namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One request's state, shared with the callbacks.
struct Transfer {
  CURL* curl = nullptr;
  Headers headers;
  std::uint64_t bytes = 0;

  // download()
  bool to_file = false;
  std::filesystem::path file;
  std::uint64_t offset = 0;
  std::uint64_t max_bytes = 0;  // the file's size limit
  std::uint64_t start = 0;      // where this answer's body starts in the file
  int fd = -1;
  bool decided = false;  // whether this answer's body goes to the file (fd >= 0) or nowhere
  bool bad_range = false;
  std::string write_error;
  const HttpClient::Progress* progress = nullptr;

  // put()
  bool uploading = false;
  std::string_view upload;  // what is left to send

  // get()
  std::string body;
  std::size_t max_body = 0;
  bool too_big = false;  // get(): over max_body; download(): over max_bytes

  ~Transfer() {
    if (fd >= 0) ::close(fd);
  }
};

size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    // A new answer (after a redirect or a 100 Continue): forget the previous one's headers.
    t->headers.clear();
    t->decided = false;
    return size * count;
  }
  std::size_t colon = line.find(':');
  if (colon != std::string_view::npos)
    t->headers.emplace_back(lower(trim(line.substr(0, colon))),
                            std::string(trim(line.substr(colon + 1))));
  return size * count;
}

bool is_digits(std::string_view s) {
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return !s.empty();
}

std::string header_of(const Transfer& t, std::string_view name) {
  for (const auto& [key, value] : t.headers)
    if (key == name) return value;
  return {};
}

long status_of(CURL* curl) {
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  return status;
}

// The first byte of "Content-Range: bytes <first>-<last>/<total>", or -1.
long long content_range_start(const std::string& value) {
  std::string_view v = trim(value);
  if (v.rfind("bytes", 0) != 0) return -1;
  v = trim(v.substr(5));
  std::size_t dash = v.find('-');
  if (dash == 0 || dash == std::string_view::npos) return -1;
  long long first = 0;
  for (char c : v.substr(0, dash)) {
    if (c < '0' || c > '9' || first > (1LL << 50)) return -1;
    first = first * 10 + (c - '0');
  }
  return first;
}

// Opens the file for this answer: at `offset` for a matching 206, from the start otherwise.
bool open_for_answer(Transfer& t, long status) {
  t.decided = true;
  if (status < 200 || status >= 300) return true;  // a body curl passes on but we ignore
  bool append = false;
  if (status == 206) {
    long long start = content_range_start(header_of(t, "content-range"));
    if (start < 0 || static_cast<std::uint64_t>(start) != t.offset) {
      t.bad_range = true;
      append = false;
    } else {
      append = t.offset > 0;
    }
  }
  t.start = append ? t.offset : 0;
  // A body announced larger than the limit is refused before a byte of it is written.
  std::string length = header_of(t, "content-length");
  if (!length.empty() && length.size() <= 19 && is_digits(length) &&
      t.start + std::stoull(length) > t.max_bytes) {
    t.too_big = true;
    return false;
  }
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (append ? 0 : O_TRUNC);
  t.fd = ::open(t.file.c_str(), flags, 0644);
  if (t.fd < 0) {
    t.write_error = cat("cannot open ", t.file.string(), ": ", std::strerror(errno));
    return false;
  }
  if (append) {
    if (::ftruncate(t.fd, static_cast<off_t>(t.offset)) != 0 ||
        ::lseek(t.fd, static_cast<off_t>(t.offset), SEEK_SET) < 0) {
      t.write_error = cat("cannot seek in ", t.file.string(), ": ", std::strerror(errno));
      return false;
    }
  }
  return !t.bad_range;
}

size_t on_file_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t len = size * count;
  if (!t->decided && !open_for_answer(*t, status_of(t->curl))) return 0;
  if (t->fd < 0) return len;
  if (t->start + t->bytes + len > t->max_bytes) {
    t->too_big = true;
    return 0;
  }
  const char* p = data;
  std::size_t left = len;
  while (left > 0) {
    ssize_t n = ::write(t->fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      t->write_error = cat("cannot write ", t->file.string(), ": ", std::strerror(errno));
      return 0;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  t->bytes += len;
  fault_point("download");
  return len;
}

size_t on_text_data(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t len = size * count;
  if (t->body.size() + len > t->max_body) {
    t->too_big = true;
    return 0;
  }
  t->body.append(data, len);
  t->bytes += len;
  return len;
}

size_t on_upload_data(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = std::min(size * count, t->upload.size());
  std::memcpy(buffer, t->upload.data(), n);
  t->upload.remove_prefix(n);
  return n;
}

int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->to_file && t->progress && *t->progress && dlnow >= 0)
    (*t->progress)(static_cast<std::uint64_t>(dlnow),
                   dltotal > 0 ? static_cast<std::uint64_t>(dltotal) : 0);
  return interrupted() ? 1 : 0;
}

class CurlClient final : public HttpClient {
 public:
  explicit CurlClient(const CurlOptions& options) : options_(options) { global_init(); }

  HttpResponse download(const std::string& url, const std::filesystem::path& file,
                        std::uint64_t offset, std::uint64_t max_bytes) override {
    Transfer t;
    t.to_file = true;
    t.file = file;
    t.offset = offset;
    t.max_bytes = max_bytes;
    t.progress = &progress_;
    std::string range = cat(offset, "-");
    HttpResponse r = perform(url, {}, t, offset > 0 ? range.c_str() : nullptr);
    if (r.transport == Transport::Ok && r.ok() && !t.decided && t.fd < 0) {
      // A 2xx answer with an empty body: the file still takes the answer's content.
      if (!open_for_answer(t, r.status)) {
        r.transport = t.bad_range ? Transport::Broken : Transport::Failed;
        r.error = t.bad_range ? "the server answered another range than the one asked for"
                              : t.write_error;
      }
    }
    if (t.bad_range && t.fd >= 0) (void)::ftruncate(t.fd, 0);
    return r;
  }

  HttpResponse get(const std::string& url, const Headers& request_headers) override {
    Transfer t;
    t.max_body = options_.max_text_bytes;
    HttpResponse r = perform(url, request_headers, t, nullptr);
    r.body = std::move(t.body);
    return r;
  }

  HttpResponse put(const std::string& url, std::string_view body,
                   const Headers& request_headers) override {
    Transfer t;
    t.max_body = options_.max_text_bytes;
    t.uploading = true;
    t.upload = body;
    HttpResponse r = perform(url, request_headers, t, nullptr);
    r.body = std::move(t.body);
    return r;
  }

 private:
  HttpResponse perform(const std::string& url, const Headers& request_headers, Transfer& t,
                       const char* range) {
    HttpResponse r;
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), curl_easy_cleanup);
    if (!handle) {
      r.transport = Transport::Failed;
      r.error = "cannot initialise libcurl";
      return r;
    }
    CURL* curl = handle.get();
    t.curl = curl;
    char errbuf[CURL_ERROR_SIZE] = {0};
    std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr,
                                                                        curl_slist_free_all);
    for (const auto& [key, value] : request_headers)
      headers.reset(curl_slist_append(headers.release(), cat(key, ": ", value).c_str()));
    set_options(curl, url, errbuf, headers.get(), range, t);
    if (std::string problem = set_certificates(curl); !problem.empty()) {
      r.transport = Transport::Failed;
      r.error = problem;
      return r;
    }

    CURLcode rc = curl_easy_perform(curl);

    r.status = status_of(curl);
    char* final_url = nullptr;
    if (curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &final_url) == CURLE_OK && final_url)
      r.final_url = final_url;
    else
      r.final_url = url;
    r.headers = t.headers;
    r.bytes = t.bytes;
    std::string why = errbuf[0] ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
    r.transport = outcome(rc, t, why);
    if (r.transport != Transport::Ok) r.error = why;
    return r;
  }

  // Everything about the transfer but the certificates: protocols, redirects, time limits,
  // headers, the callbacks that fill `t`.
  void set_options(CURL* curl, const std::string& url, char* errbuf, curl_slist* headers,
                   const char* range, Transfer& t) const {
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, t.uploading ? 0L : 1L);
    if (t.uploading) {
      curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(t.upload.size()));
      curl_easy_setopt(curl, CURLOPT_READFUNCTION, on_upload_data);
      curl_easy_setopt(curl, CURLOPT_READDATA, &t);
    }
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, options_.max_redirects);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS,
                     static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, options_.connect_timeout_s);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, options_.low_speed_limit);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, options_.low_speed_time_s);
    if (options_.timeout_ms > 0) curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, options_.timeout_ms);
    // A text answer whose Content-Length is over its bound is refused before its body is read
    // (on_text_data bounds one that announces nothing). Downloads check their own (with ranges).
    if (!t.to_file)
      curl_easy_setopt(curl, CURLOPT_MAXFILESIZE_LARGE, static_cast<curl_off_t>(t.max_body));
    curl_easy_setopt(curl, CURLOPT_USERAGENT, user_agent().c_str());  // libcurl copies strings
    if (headers) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    if (range) curl_easy_setopt(curl, CURLOPT_RANGE, range);
    // Index pages may come compressed; downloads must be the bytes as stored, so ask for none.
    if (!t.to_file) curl_easy_setopt(curl, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, t.to_file ? on_file_data : on_text_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  }

  // The CA bundle pip would use (ca_bundle_file), and $SSL_CERT_DIR. Returns a problem, or "".
  static std::string set_certificates(CURL* curl) {
    auto ca_file = ca_bundle_file();
    if (!ca_file) return ca_file.error().message;
    if (!ca_file->empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, ca_file->c_str());
    std::string ca_dir = env_value("SSL_CERT_DIR");
    if (!ca_dir.empty()) curl_easy_setopt(curl, CURLOPT_CAPATH, ca_dir.c_str());
    return "";
  }

  // What the transfer's end means; `why` becomes the reason kiln gives.
  Transport outcome(CURLcode rc, const Transfer& t, std::string& why) const {
    switch (rc) {
      case CURLE_OK:
      case CURLE_HTTP_RETURNED_ERROR:  // the status says it
        return Transport::Ok;
      case CURLE_COULDNT_CONNECT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY:
      case CURLE_SSL_CONNECT_ERROR:
        return Transport::ConnectFailed;
      case CURLE_OPERATION_TIMEDOUT:
        return Transport::TimedOut;
      case CURLE_PARTIAL_FILE:
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_HTTP2:
      case CURLE_HTTP2_STREAM:
        return Transport::Broken;
      case CURLE_FILESIZE_EXCEEDED: {  // the Content-Length announced more than max_text_bytes
        std::string length = header_of(t, "content-length");
        why =
            cat("the answer announces ", is_digits(length) && length.size() <= 20 ? length : "more",
                " bytes, more than its limit of ", options_.max_text_bytes, " (not read)");
        return Transport::TooLarge;
      }
      case CURLE_ABORTED_BY_CALLBACK:
        why = "interrupted";
        return Transport::Interrupted;
      case CURLE_WRITE_ERROR:
        if (t.bad_range) {
          why = "the server answered another range than the one asked for";
          return Transport::Broken;
        }
        if (t.too_big && t.to_file) {
          why = cat("the file is larger than its limit of ", t.max_bytes, " bytes");
          return Transport::TooLarge;
        }
        if (t.too_big) {
          why = cat("the answer is larger than ", options_.max_text_bytes, " bytes");
          return Transport::TooLarge;
        }
        if (!t.write_error.empty()) why = t.write_error;
        return Transport::Failed;
      default:
        return Transport::Failed;
    }
  }

  CurlOptions options_;
};

}  // namespace

const std::vector<std::string> kSystemCaBundles = {
    "/etc/ssl/certs/ca-certificates.crt",                 // Debian, Ubuntu, Arch, Gentoo
    "/etc/pki/tls/certs/ca-bundle.crt",                   // RHEL, Rocky, Fedora, Amazon Linux
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",  // RHEL 7+, its source of truth
    "/etc/ssl/ca-bundle.pem",                             // SUSE
    "/var/lib/ca-certificates/ca-bundle.pem",             // SUSE, newer
    "/etc/ssl/cert.pem",                                  // Alpine, Void
    "/etc/pki/tls/cacert.pem",                            // OpenELEC
};

Expected<std::string> ca_bundle_file(const std::vector<std::string>& candidates) {
  std::error_code ec;
  for (const char* var : {"PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"}) {
    std::string named = env_value(var);
    if (named.empty()) continue;
    if (!std::filesystem::is_regular_file(named, ec))
      return Error::bad_input(cat("$", var, " names '", named, "', which is not a file"));
    return named;
  }
  for (const auto& path : candidates)
    if (std::filesystem::is_regular_file(path, ec)) return path;
  return std::string();
}

std::string user_agent() {
  return "kiln/" KILN_VERSION;
}

std::unique_ptr<HttpClient> make_curl_client(const CurlOptions& options) {
  return std::make_unique<CurlClient>(options);
}

}  // namespace kiln::fetch
