// The HTTP server of `kiln serve`: libmicrohttpd (epoll, a small pool of event-loop threads) in
// front of index::handle(). Idle and slow clients cost a socket and a bounded buffer each, never
// a thread; each request head must arrive whole within head_timeout_s, and near the connection
// limit the connection that has waited longest for its head makes room for a new one, so slow
// clients cannot starve other requests. A wheel is served under its sha256 (as its strong ETag)
// only once its bytes were hashed to that value (again whenever the file changes).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/expected.h"
#include "index/http.h"
#include "index/scan.h"

namespace kiln::index {

struct ServerOptions {
  std::string host = "127.0.0.1";                  // a numeric address or a name resolving to one
  std::uint16_t port = 0;                          // 0: a free port
  std::string token;                               // see HandlerOptions
  std::map<std::string, StaticFile> static_files;  // see HandlerOptions
  Routes routes;                                   // see HandlerOptions
  unsigned threads = 0;                            // event-loop threads; 0: one per core, 2 to 8
  unsigned max_connections = 0;                    // 0: 10000, or what the open-files limit allows
  unsigned idle_timeout_s = 30;  // a connection with no traffic for this long is closed
  unsigned head_timeout_s = 10;  // a request head (line and headers) must be whole this soon
                                 // after the connection opened or its last answer was sent
  // A request head (request line and header fields, as sent) of more than `request_bytes` bytes
  // gets 431 (414 when the request line alone is that long), as does one of more than
  // `request_fields` fields (header fields, cookies and query arguments together). Each
  // connection's buffer is sized from both (connection_pool_bytes) so that every head within them
  // leaves room for its answer, and kiln answers every head over them itself.
  std::size_t request_bytes = 16384;
  std::size_t request_fields = 100;
  // One line per request (client, method, path, status, bytes, time); none when empty.
  std::function<void(std::string_view)> log;
};

// libmicrohttpd's per-connection buffer for these limits: three times the head limit (the head
// itself; libmicrohttpd's copy of its Cookie header; what it reads ahead of a pipelined request
// and the answer's status line and header fields) and 64 bytes per field (its record of each).
std::size_t connection_pool_bytes(const ServerOptions& options);

class Server {
 public:
  // Binds and starts serving `index` (which must outlive the server).
  static Expected<std::unique_ptr<Server>> start(const ServerOptions& options, CacheIndex& index);
  ~Server();  // stops: closes the listening socket and every connection
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT/" ("[::1]" for IPv6 addresses).
  std::string url() const;

  struct Impl;

 private:
  Server() = default;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  std::uint16_t port_ = 0;
};

}  // namespace kiln::index
