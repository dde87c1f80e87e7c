#include "index/server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/strings.h"

namespace kiln::index {

namespace {

using Clock = std::chrono::steady_clock;

// The connections waiting for a request head (just opened, or between keep-alive requests): each
// must have its head whole within `timeout`, and above `soft_limit` connections the one waiting
// longest is cut for each new one. Cutting is shutdown(2) of the socket, under the lock that
// libmicrohttpd's "closed" notification takes before it closes the descriptor, so the descriptor
// cut is always the connection's own.
class HeadDeadlines {
 public:
  HeadDeadlines(Clock::duration timeout, std::size_t soft_limit)
      : timeout_(timeout), soft_limit_(soft_limit) {}

  void started(const void* c, int fd) {
    std::lock_guard lock(mutex_);
    auto since = Clock::now();
    conns_[c] = Conn{fd, since, true, false};
    waiting_.emplace(since, c);
    while (conns_.size() - cut_ > soft_limit_ && !waiting_.empty() && waiting_.begin()->second != c)
      cut(waiting_.begin()->second);
  }
  void head_arrived(const void* c) { set_waiting(c, false); }
  void answered(const void* c) { set_waiting(c, true); }
  void closed(const void* c) {
    std::lock_guard lock(mutex_);
    auto it = conns_.find(c);
    if (it == conns_.end()) return;
    if (it->second.waiting) waiting_.erase({it->second.since, c});
    if (it->second.cut) --cut_;
    conns_.erase(it);
  }
  // Cuts every waiting connection past its deadline.
  void expire() {
    std::lock_guard lock(mutex_);
    const auto now = Clock::now();
    while (!waiting_.empty() && now - waiting_.begin()->first >= timeout_)
      cut(waiting_.begin()->second);
  }

 private:
  struct Conn {
    int fd = -1;
    Clock::time_point since;
    bool waiting = false;
    bool cut = false;
  };
  void set_waiting(const void* c, bool waiting) {
    std::lock_guard lock(mutex_);
    auto it = conns_.find(c);
    if (it == conns_.end() || it->second.cut || it->second.waiting == waiting) return;
    if (it->second.waiting) waiting_.erase({it->second.since, c});
    it->second.waiting = waiting;
    it->second.since = Clock::now();
    if (waiting) waiting_.emplace(it->second.since, c);
  }
  void cut(const void* c) {  // mutex_ held
    Conn& conn = conns_.at(c);
    waiting_.erase({conn.since, c});
    conn.waiting = false;
    conn.cut = true;
    ++cut_;
    ::shutdown(conn.fd, SHUT_RDWR);  // libmicrohttpd sees the end of the stream and closes it
  }

  const Clock::duration timeout_;
  const std::size_t soft_limit_;
  std::mutex mutex_;
  std::unordered_map<const void*, Conn> conns_;
  std::set<std::pair<Clock::time_point, const void*>> waiting_;
  std::size_t cut_ = 0;  // connections cut but not yet closed
};

}  // namespace

struct Server::Impl {
  CacheIndex* index = nullptr;
  HandlerOptions handler;
  ServerOptions limits;  // request_bytes and request_fields
  std::function<void(std::string_view)> log;
  struct sockaddr_storage addr {};
  MHD_Daemon* daemon = nullptr;
  std::unique_ptr<HeadDeadlines> deadlines;
  WheelVerifier verifier;
  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread watchdog;  // cuts connections past their head deadline
};

namespace {

// *req_cls: the request's headers were seen / it was answered.
int g_headers_seen = 0;
int g_answered = 0;

// The path reaches index::handle() exactly as sent: it decodes (and refuses) escapes itself.
size_t keep_escaped(void*, struct MHD_Connection*, char* s) {
  return std::strlen(s);
}

void mhd_log(void*, const char* fmt, va_list ap) {
  char buf[512];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  std::string line(trim(buf));
  if (!line.empty()) log::verbose(cat("http: ", line));
}

MHD_Result collect_header(void* cls, enum MHD_ValueKind, const char* key, const char* value) {
  auto* headers = static_cast<std::vector<std::pair<std::string, std::string>>*>(cls);
  if (headers->size() < 256) headers->emplace_back(key ? key : "", value ? value : "");
  return MHD_YES;
}

std::string client_address(struct MHD_Connection* c) {
  const union MHD_ConnectionInfo* info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!info || !info->client_addr) return "-";
  char buf[INET6_ADDRSTRLEN] = "-";
  const struct sockaddr* sa = info->client_addr;
  if (sa->sa_family == AF_INET)
    ::inet_ntop(AF_INET, &reinterpret_cast<const struct sockaddr_in*>(sa)->sin_addr, buf,
                sizeof buf);
  else if (sa->sa_family == AF_INET6)
    ::inet_ntop(AF_INET6, &reinterpret_cast<const struct sockaddr_in6*>(sa)->sin6_addr, buf,
                sizeof buf);
  return buf;
}

// A request path as it may appear in a log line: printable ASCII, at most 300 bytes.
std::string loggable(std::string_view text) {
  std::string out;
  for (char ch : text.substr(0, 300)) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x21 || c >= 0x7f || c == '"')
      out += cat("\\x", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    else
      out += ch;
  }
  if (text.size() > 300) out += "...";
  return out;
}

// --- Request heads ------------------------------------------------------------------------------
// libmicrohttpd 0.9.75 parses a request head in place, in the connection's read buffer (a pool of
// MHD_OPTION_CONNECTION_MEMORY_LIMIT bytes): the request line starts at `method`; the first space
// of the line became a NUL, and `url` points past it and any spaces after it; the space before the
// version and every line's CR LF became NULs. MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE is the
// head's size as sent, from the method to the end of the empty line. It answers 414 or 431 itself
// only when the head does not fit in the pool; a head that fits but leaves no room for the
// answer's own head used to get the connection closed without an answer. So the pool is larger
// than kiln's limits (connection_pool_bytes), and kiln answers every head over them itself, on the
// socket, without the pool. The method string kiln gets ends at its first NUL ("GET\0" reads as
// "GET"): the bytes between that end and `url` tell whether it held one.

constexpr std::size_t kFieldRecordBytes = 64;  // MHD_HTTP_Header: seven words, 16-aligned

// RFC 9110's tchar: a method is one or more of these.
bool is_tchar(char c) {
  return is_ascii_alnum(c) || (c != '\0' && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

// Whether the method libmicrohttpd found is the whole first word of the request line, and a token:
// its C string must end at the NUL that replaced the space, followed by spaces only up to `url`.
bool method_is_token(const char* method, const char* url, std::size_t head_bytes) {
  if (!method || !url || url <= method || static_cast<std::size_t>(url - method) > head_bytes)
    return false;
  const std::size_t length = std::strlen(method);
  if (length == 0 || method + length >= url) return false;
  for (std::size_t i = 0; i < length; ++i)
    if (!is_tchar(method[i])) return false;
  for (const char* p = method + length + 1; p < url; ++p)
    if (*p != ' ') return false;
  return true;
}

// The request line's length in the head (from the method to the end of the version).
std::size_t request_line_bytes(const char* method, const char* url, const char* version,
                               std::size_t head_bytes) {
  const char* end = method + head_bytes;
  if (version && version > url && version < end)
    return std::strlen(version) + static_cast<std::size_t>(version - method);
  return std::min(head_bytes, std::strlen(url) + static_cast<std::size_t>(url - method));
}

struct Refusal {
  int status = 0;
  std::string reason;  // the status line's
  std::string body;
};

// Why a request head is refused before it is routed: 431 or 414 past the limits, 400 for a method
// that is not a token. nullopt: fine.
std::optional<Refusal> refuse_head(struct MHD_Connection* c, const char* url, const char* method,
                                   const char* version, const ServerOptions& limits) {
  const union MHD_ConnectionInfo* info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  const std::size_t head = info ? info->header_size : std::numeric_limits<std::size_t>::max();
  const int fields = MHD_get_connection_values(
      c, static_cast<MHD_ValueKind>(MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND),
      nullptr, nullptr);
  if (head > limits.request_bytes || fields < 0 ||
      static_cast<std::size_t>(fields) > limits.request_fields) {
    bool line_too_long = head != std::numeric_limits<std::size_t>::max() && method && url &&
                         url > method &&
                         request_line_bytes(method, url, version, head) > limits.request_bytes;
    if (line_too_long)
      return Refusal{414, "URI Too Long",
                     cat("414 URI too long: a request line may hold at most ", limits.request_bytes,
                         " bytes\n")};
    return Refusal{431, "Request Header Fields Too Large",
                   cat("431 request header fields too large: a request head may hold at most ",
                       limits.request_bytes, " bytes and ", limits.request_fields,
                       " fields (headers, cookies and query arguments)\n")};
  }
  if (!method_is_token(method, url, head))
    return Refusal{400, "Bad Request", "400 bad request: the method is not a token\n"};
  return std::nullopt;
}

// Answers on the connection's socket itself, without libmicrohttpd's pool (which a head over the
// limits may have filled): one short write that a fresh socket's send buffer always takes; the
// caller then has libmicrohttpd close the connection (its shutdown sends the FIN after it).
void answer_on_socket(struct MHD_Connection* c, const Refusal& r, bool head_request) {
  const union MHD_ConnectionInfo* info =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!info) return;
  char date[64] = "";
  std::time_t now = std::time(nullptr);
  struct tm tm {};
  if (::gmtime_r(&now, &tm)) std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  std::string out =
      cat("HTTP/1.1 ", r.status, " ", r.reason, "\r\nDate: ", date,
          "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", r.body.size(),
          "\r\nConnection: close\r\n\r\n", head_request ? "" : r.body);
  std::string_view rest = out;
  while (!rest.empty()) {
    ssize_t n = ::send(info->connect_fd, rest.data(), rest.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a client that reads nothing of what it was sent: closed unanswered
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

MHD_Result count_lengths(void* cls, enum MHD_ValueKind, const char* key, const char*) {
  if (key && strcasecmp(key, "Content-Length") == 0) ++*static_cast<int*>(cls);
  return MHD_YES;
}

MHD_Result on_request(void* cls, struct MHD_Connection* c, const char* url, const char* method,
                      const char* version, const char*, size_t* upload_size, void** req_cls) {
  auto* impl = static_cast<Server::Impl*>(cls);
  if (*req_cls == &g_answered) {  // a body after the answer: dropped unread
    *upload_size = 0;
    return MHD_YES;
  }
  std::optional<Refusal> refused;
  if (*req_cls == nullptr) {
    impl->deadlines->head_arrived(c);
    refused = refuse_head(c, url, method, version, impl->limits);
    if (refused && refused->status != 400) {
      answer_on_socket(c, *refused, method && std::strcmp(method, "HEAD") == 0);
      if (impl->log)
        impl->log(cat(client_address(c), " ", loggable(method ? method : ""), " ",
                      loggable(url ? url : ""), " ", refused->status, " ", refused->body.size(),
                      " -"));
      return MHD_NO;  // libmicrohttpd closes the connection
    }
  }
  if (*req_cls == nullptr && !refused) {
    // The headers are in. A GET or HEAD without a body is answered on the next call, which
    // keeps the connection alive; anything else now (libmicrohttpd then closes the connection
    // rather than read a body kiln never wants).
    bool bodyless = (std::strcmp(method, "GET") == 0 || std::strcmp(method, "HEAD") == 0) &&
                    !MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Transfer-Encoding");
    const char* length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    int lengths = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_lengths, &lengths);
    if ((length && std::strcmp(length, "0") != 0) || lengths > 1) bodyless = false;
    if (bodyless) {
      *req_cls = &g_headers_seen;
      return MHD_YES;
    }
  }
  *req_cls = &g_answered;
  auto started = std::chrono::steady_clock::now();
  Request req;
  req.method = method ? method : "";
  req.version = version ? version : "";
  req.path = url ? url : "";
  MHD_get_connection_values(c, MHD_HEADER_KIND, collect_header, &req.headers);

  Response resp;
  try {
    if (refused) {
      resp = Response{
          refused->status, {{"Content-Type", "text/plain; charset=utf-8"}}, refused->body, {}};
    } else {
      auto model = impl->index->current();
      resp = handle(req, *model, impl->handler);
    }
  } catch (const std::exception& e) {
    resp = Response{
        500, {{"Content-Type", "text/plain; charset=utf-8"}}, "500 internal error\n", std::nullopt};
    log::error(cat("serve: ", req.method, " ", loggable(req.path), ": ", e.what()));
  }

  struct MHD_Response* r = nullptr;
  if (resp.file) {
    auto fd = impl->verifier.open(resp.file->dir, resp.file->filename, resp.file->file_size,
                                  resp.file->sha256);
    if (fd) {
      r = MHD_create_response_from_fd_at_offset64(resp.file->length, *fd, resp.file->offset);
      if (!r) ::close(*fd);
    } else {  // removed (cache gc), or damaged: never served under its hash
      log::warn(cat("serve: ", fd.error().message));
      resp = Response{
          404, {{"Content-Type", "text/plain; charset=utf-8"}}, "404 not found\n", std::nullopt};
    }
  }
  if (!resp.file || !r)
    r = MHD_create_response_from_buffer(resp.body.size(), resp.body.data(), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;  // out of memory: MHD closes the connection
  for (const auto& [k, v] : resp.headers) MHD_add_response_header(r, k.c_str(), v.c_str());
  MHD_Result queued = MHD_queue_response(c, static_cast<unsigned>(resp.status), r);
  MHD_destroy_response(r);

  if (impl->log) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
            .count();
    char timing[32];
    std::snprintf(timing, sizeof timing, "%.2fms", ms);
    impl->log(cat(client_address(c), " ", loggable(req.method), " ", loggable(req.path), " ",
                  resp.status, " ", req.method == "HEAD" ? 0 : resp.content_length(), " ", timing));
  }
  return queued;
}

void on_connection(void* cls, struct MHD_Connection* c, void**,
                   enum MHD_ConnectionNotificationCode code) {
  auto* impl = static_cast<Server::Impl*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo* info =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (info) impl->deadlines->started(c, info->connect_fd);
  } else {
    impl->deadlines->closed(c);
  }
}

void on_completed(void* cls, struct MHD_Connection* c, void**, enum MHD_RequestTerminationCode) {
  static_cast<Server::Impl*>(cls)->deadlines->answered(c);  // the next request's head is awaited
}

unsigned default_max_connections() {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1000;
  // Raise the soft limit as far as allowed: every connection is a descriptor.
  rlim_t want = rl.rlim_max == RLIM_INFINITY ? 65536 : std::min<rlim_t>(rl.rlim_max, 65536);
  if (rl.rlim_cur < want) {
    rl.rlim_cur = want;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    ::getrlimit(RLIMIT_NOFILE, &rl);
  }
  rlim_t usable = rl.rlim_cur > 128 ? rl.rlim_cur - 64 : 64;
  return static_cast<unsigned>(std::min<rlim_t>(usable, 10000));
}

}  // namespace

std::size_t connection_pool_bytes(const ServerOptions& options) {
  return 3 * options.request_bytes + options.request_fields * kFieldRecordBytes;
}

Expected<std::unique_ptr<Server>> Server::start(const ServerOptions& options, CacheIndex& index) {
  std::unique_ptr<Server> server(new Server());
  server->impl_ = std::make_unique<Impl>();
  Impl& impl = *server->impl_;
  impl.index = &index;
  impl.handler.token = options.token;
  impl.handler.static_files = options.static_files;
  impl.handler.routes = options.routes;
  impl.limits.request_bytes = options.request_bytes;
  impl.limits.request_fields = options.request_fields;
  impl.log = options.log;
  server->host_ = options.host;

  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  int gai = ::getaddrinfo(options.host.c_str(), nullptr, &hints, &found);
  if (gai != 0 || !found)
    return Error::bad_input(
        cat("--host ", options.host, ": ", gai ? ::gai_strerror(gai) : "no address"));
  std::memcpy(&impl.addr, found->ai_addr, found->ai_addrlen);
  ::freeaddrinfo(found);
  bool ipv6 = impl.addr.ss_family == AF_INET6;
  if (ipv6)
    reinterpret_cast<struct sockaddr_in6*>(&impl.addr)->sin6_port = htons(options.port);
  else
    reinterpret_cast<struct sockaddr_in*>(&impl.addr)->sin_port = htons(options.port);

  unsigned threads = options.threads;
  if (threads == 0) threads = std::clamp(std::thread::hardware_concurrency(), 2u, 8u);
  unsigned max_conn = options.max_connections ? options.max_connections : default_max_connections();
  // Room for new clients: above 90% of the limit, those waiting longest for their head are cut.
  impl.deadlines =
      std::make_unique<HeadDeadlines>(std::chrono::seconds(options.head_timeout_s),
                                      std::max<std::size_t>(1, max_conn - max_conn / 10));
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0);
  impl.daemon = MHD_start_daemon(
      flags, options.port, nullptr, nullptr, on_request, &impl, MHD_OPTION_EXTERNAL_LOGGER, mhd_log,
      nullptr, MHD_OPTION_NOTIFY_CONNECTION, on_connection, &impl, MHD_OPTION_NOTIFY_COMPLETED,
      on_completed, &impl, MHD_OPTION_SOCK_ADDR, reinterpret_cast<struct sockaddr*>(&impl.addr),
      MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0u, MHD_OPTION_CONNECTION_LIMIT,
      max_conn, MHD_OPTION_CONNECTION_TIMEOUT, options.idle_timeout_s,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_pool_bytes(options),
      MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, nullptr,
      MHD_OPTION_END);
  if (!impl.daemon) {
    int error = errno;
    return Error::failed(cat("cannot listen on ", options.host, ":", options.port, ": ",
                             error ? std::strerror(error) : "libmicrohttpd refused to start",
                             error == EADDRINUSE ? " (another server has the port: give "
                                                   "another with --port, or --port 0 for a free "
                                                   "one, which kiln prints)"
                                                 : ""));
  }
  const union MHD_DaemonInfo* info = MHD_get_daemon_info(impl.daemon, MHD_DAEMON_INFO_BIND_PORT);
  server->port_ = info ? info->port : options.port;
  impl.watchdog = std::thread([&impl] {
    std::unique_lock lock(impl.stop_mutex);
    while (
        !impl.stop_cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return impl.stopping; }))
      impl.deadlines->expire();
  });
  return server;
}

Server::~Server() {
  if (!impl_) return;
  if (impl_->watchdog.joinable()) {
    {
      std::lock_guard lock(impl_->stop_mutex);
      impl_->stopping = true;
    }
    impl_->stop_cv.notify_all();
    impl_->watchdog.join();
  }
  if (impl_->daemon) MHD_stop_daemon(impl_->daemon);
}

std::string Server::url() const {
  bool ipv6 = host_.find(':') != std::string::npos;
  return cat("http://", ipv6 ? cat("[", host_, "]") : host_, ":", port_, "/");
}

}  // namespace kiln::index
