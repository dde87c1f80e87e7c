// index/server: a real libmicrohttpd server on 127.0.0.1 with raw-socket clients: keep-alive,
// HEAD and Range on real wheels, raw traversal paths, oversized headers, idle and slow clients,
// new builds without a restart, the token.
#include "index/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "core/fs.h"
#include "index_testutil.h"

namespace kiln::index {

namespace {

int connect_to(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

struct HttpReply {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
  std::string header(std::string_view name) const {
    for (const auto& line : split(head, "\r\n")) {
      auto colon = line.find(':');
      if (colon != std::string::npos && lower(line.substr(0, colon)) == lower(name))
        return std::string(trim(std::string_view(line).substr(colon + 1)));
    }
    return {};
  }
};

// Reads one response; the body by Content-Length (none for HEAD), within `timeout_ms`.
HttpReply read_reply(int fd, bool head_request = false, int timeout_ms = 3000) {
  HttpReply r;
  std::string buf;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  std::size_t need = std::string::npos;
  while (std::chrono::steady_clock::now() < deadline) {
    auto end = buf.find("\r\n\r\n");
    if (end != std::string::npos && need == std::string::npos) {
      r.head = buf.substr(0, end);
      r.status = std::atoi(r.head.substr(9, 3).c_str());
      std::string cl = r.header("Content-Length");
      need = end + 4 + (head_request || cl.empty() ? 0 : std::stoull(cl));
    }
    if (need != std::string::npos && buf.size() >= need) {
      r.body = buf.substr(r.head.size() + 4, need - r.head.size() - 4);
      return r;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char chunk[65536];
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    buf.append(chunk, static_cast<std::size_t>(n));
  }
  if (r.head.empty()) r.head = buf;
  return r;
}

HttpReply request(std::uint16_t port, const std::string& raw, bool head_request = false) {
  int fd = connect_to(port);
  if (fd < 0) return {};
  send_all(fd, raw);
  HttpReply r = read_reply(fd, head_request);
  ::close(fd);
  return r;
}

std::string get_line(const std::string& path, const std::string& extra = "") {
  return cat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1\r\n", extra, "Connection: close\r\n\r\n");
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-serve-").value());
    cache_ = dir_->path() / "cache";
    entry_ = testutil::add_entry(cache_, "k1", "default", kWheel, 10, std::string(100000, 'p'));
    // A secret beside the cache that no request may reach.
    std::ofstream(dir_->path() / "secret.txt") << "secret";
    index_ = std::make_unique<CacheIndex>(cache_);
  }
  void start(ServerOptions options = {}) {
    options.threads = 2;
    options.idle_timeout_s = 5;
    server_ = Server::start(options, *index_).value();
  }
  std::uint16_t port() const { return server_->port(); }

  static constexpr const char* kWheel = "demo-1.0+cu130-py3-none-any.whl";
  static constexpr const char* kWheelUrl = "/default/simple/demo/demo-1.0%2Bcu130-py3-none-any.whl";
  std::unique_ptr<TempDir> dir_;
  fs::path cache_, entry_;
  std::unique_ptr<CacheIndex> index_;
  std::unique_ptr<Server> server_;
};

}  // namespace

TEST_F(ServerTest, ServesPagesAndWheelsOverKeepAlive) {
  start();
  EXPECT_NE(port(), 0);
  EXPECT_EQ(server_->url(), cat("http://127.0.0.1:", port(), "/"));
  int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  std::string wheel = read_file(entry_ / kWheel).value();
  send_all(fd,
           "GET /default/simple/demo/ HTTP/1.1\r\nHost: x\r\nAccept: "
           "application/vnd.pypi.simple.v1+json\r\n\r\n");
  HttpReply page = read_reply(fd);
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.header("Content-Type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(nlohmann::json::parse(page.body)["files"][0]["size"], wheel.size());
  // Same connection: HEAD, then a range, then the whole wheel.
  send_all(fd, cat("HEAD ", kWheelUrl, " HTTP/1.1\r\nHost: x\r\n\r\n"));
  HttpReply head = read_reply(fd, true);
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.header("Content-Length"), std::to_string(wheel.size()));
  EXPECT_TRUE(head.body.empty());
  send_all(fd, cat("GET ", kWheelUrl, " HTTP/1.1\r\nHost: x\r\nRange: bytes=-22\r\n\r\n"));
  HttpReply tail = read_reply(fd);
  EXPECT_EQ(tail.status, 206);
  EXPECT_EQ(tail.body, wheel.substr(wheel.size() - 22));  // the zip's end record
  send_all(
      fd,
      cat("GET /default/simple/demo/demo-1.0+cu130-py3-none-any.whl HTTP/1.1\r\nHost: x\r\n\r\n"));
  HttpReply whole = read_reply(fd);
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.header("ETag"), cat('"', sha256_hex(wheel), '"'));
  EXPECT_EQ(whole.body, wheel);
  ::close(fd);
}

TEST_F(ServerTest, RawTraversalAndMalformedRequestsAreRefused) {
  start();
  const char* paths[] = {"/../secret.txt",
                         "/../../secret.txt",
                         "/%2e%2e/%2e%2e/secret.txt",
                         "/default/simple/demo/%2e%2e%2f%2e%2e%2f%2e%2e%2fsecret.txt",
                         "/default/simple/demo/..%2F..%2Fk1%2Fentry.json",
                         "/default/simple/demo/entry.json",
                         "//secret.txt",
                         "/default/simple/demo/..\\..\\secret.txt",
                         "/default/simple/demo/%00",
                         "/default/simple/demo/%zz"};
  for (const char* path : paths) {
    HttpReply r = request(port(), get_line(path));
    EXPECT_TRUE(r.status == 400 || r.status == 404) << path << " -> " << r.head;
    EXPECT_EQ(r.body.find("secret"), std::string::npos);
  }
  // Absolute-form and asterisk-form targets, a bad method and no version at all.
  for (const char* raw :
       {"GET http://127.0.0.1/../secret.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "POST /default/simple/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: "
        "close\r\n\r\nhello",
        "GARBAGE\r\n\r\n"}) {
    HttpReply r = request(port(), raw);
    EXPECT_TRUE(r.status == 400 || r.status == 404 || r.status == 405 || r.status == 0)
        << raw << " -> " << r.head;
    EXPECT_EQ(r.body.find("secret"), std::string::npos);
  }
  // Oversized headers are refused, and the server still answers afterwards.
  HttpReply big =
      request(port(), get_line("/", cat("X-Big: ", std::string(64 * 1024, 'a'), "\r\n")));
  EXPECT_EQ(big.status, 431) << big.head.substr(0, 200);
  HttpReply long_path = request(port(), get_line("/" + std::string(64 * 1024, 'a')));
  EXPECT_EQ(long_path.status, 414) << long_path.head.substr(0, 200);
  EXPECT_EQ(request(port(), get_line("/")).status, 200);
}

TEST_F(ServerTest, IdleAndSlowClientsDoNotDelayOthers) {
  start();
  std::vector<int> fds;
  for (int i = 0; i < 300; ++i) {  // idle: connected, nothing sent
    int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  for (int i = 0; i < 30; ++i) {  // slowloris: a request that never ends
    int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    send_all(fd, "GET /default/simple/ HTTP/1.1\r\nHost: x\r\nX-Slow: a");
    fds.push_back(fd);
  }
  auto t0 = std::chrono::steady_clock::now();
  HttpReply r = request(port(), get_line("/default/simple/demo/"));
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(r.status, 200);
  EXPECT_LT(took, std::chrono::milliseconds(1000));
  for (int fd : fds) ::close(fd);
}

// A request head that trickles in (a byte now and then, each resetting the idle timeout) is cut at
// its deadline; so is a keep-alive connection that never sends its next head.
TEST_F(ServerTest, RequestHeadsHaveADeadline) {
  ServerOptions options;
  options.head_timeout_s = 1;
  start(options);
  int slow = connect_to(port());
  ASSERT_GE(slow, 0);
  send_all(slow, "GET /default/simple/ HTTP/1.1\r\nHost: x\r\n");
  bool closed = false;
  auto t0 = std::chrono::steady_clock::now();
  while (!closed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(4)) {
    send_all(slow, "X");
    pollfd p{slow, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      char c;
      closed = ::recv(slow, &c, 1, 0) <= 0;
    }
  }
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_TRUE(closed);
  EXPECT_GE(took, std::chrono::milliseconds(700));
  EXPECT_LT(took, std::chrono::milliseconds(2500));
  ::close(slow);
  int keep = connect_to(port());
  send_all(keep, "GET /default/simple/ HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(read_reply(keep).status, 200);
  char c;
  pollfd p{keep, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 2500), 1);  // the next head never came: closed
  EXPECT_EQ(::recv(keep, &c, 1, 0), 0);
  ::close(keep);
}

// At the connection limit, the connections waiting longest for their heads make room.
TEST_F(ServerTest, NewClientsGetRoomAtTheConnectionLimit) {
  ServerOptions options;
  options.max_connections = 40;
  start(options);
  std::vector<int> fds;
  for (int i = 0; i < 80; ++i) {  // twice the limit: slow heads that never end
    int fd = connect_to(port());
    ASSERT_GE(fd, 0);
    send_all(fd, "GET /default/simple/ HTTP/1.1\r\nX-Slow: a");
    fds.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    HttpReply r = request(port(), get_line("/default/simple/demo/"));
    EXPECT_EQ(r.status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  }
  for (int fd : fds) ::close(fd);
}

TEST_F(ServerTest, AmbiguousRequestsAreRefused) {
  start();
  EXPECT_EQ(
      request(port(),
              "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\nhello")
          .status,
      400);
  EXPECT_EQ(request(port(), "GET / HTTP/1.1\r\nConnection: close\r\n\r\n").status, 400);  // no Host
  EXPECT_EQ(request(port(), "GET / HTTP/1.0\r\n\r\n").status, 200);  // 1.0 needs none
}

// A request for / whose head (request line and header fields, the empty line included) is exactly
// `size` bytes: a padding header makes up the rest, after `fields` headers of its own ("X-N: v").
std::string head_of(std::size_t size, int fields = 0, bool close = true) {
  std::string start = cat("GET / HTTP/1.1\r\nHost: x\r\n", close ? "Connection: close\r\n" : "");
  for (int i = 0; i < fields; ++i) start += cat("X-", i, ": v\r\n");
  start += "X-Pad: ";
  const std::string end = "\r\n\r\n";
  return start + std::string(size - start.size() - end.size(), 'a') + end;
}

// Every head over the limit is answered 431, every other one served: around the old gap (heads of
// 15,950-16,180 bytes, which filled libmicrohttpd's 16 KiB pool so that no answer fit, got the
// connection closed unanswered), at the limit, and at the edge of the pool as it is now.
TEST_F(ServerTest, EveryHeadOverTheLimitGets431AndEveryOtherAnAnswer) {
  start();
  const std::size_t limit = ServerOptions{}.request_bytes;
  const std::size_t pool = connection_pool_bytes(ServerOptions{});
  ASSERT_EQ(limit, 16384u);  // docs/serve.md, "Limits"
  std::vector<std::size_t> sizes = {15000, 15900, 16000,     16100, 16300,
                                    20000, 65536, limit - 1, limit, limit + 1};
  for (std::size_t n = 15800; n <= 16600; n += 20) sizes.push_back(n);
  for (std::size_t n = pool - 1200; n <= pool + 400; n += 16) sizes.push_back(n);
  for (std::size_t n : sizes) {
    HttpReply r = request(port(), head_of(n));
    EXPECT_EQ(r.status, n <= limit ? 200 : 431) << n << " bytes: " << r.head.substr(0, 120);
  }
  // A request line alone over the limit: 414, in the pool or past it.
  for (std::size_t n : {limit + 100, pool - 200, pool + 4000})
    EXPECT_EQ(request(port(), get_line("/" + std::string(n, 'a'))).status, 414) << n;
  // HEAD gets the head of the answer only.
  HttpReply head = request(
      port(), "HEAD / HTTP/1.1\r\nHost: x\r\nX-Pad: " + std::string(limit, 'a') + "\r\n\r\n", true);
  EXPECT_EQ(head.status, 431);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(request(port(), get_line("/")).status, 200);
}

// At most 100 fields (header fields, cookies and query arguments together): more get 431 (heads
// of many small fields filled the pool with libmicrohttpd's records of them); a head at both
// limits at once, a large Cookie header (which libmicrohttpd copies) included, and one pipelined
// behind it on the same connection, still get their answers.
TEST_F(ServerTest, EveryHeadOverTheFieldLimitGets431) {
  start();
  for (int n : {50, 97, 98, 99, 100, 101, 150, 400, 1200}) {  // all under 16 KiB
    HttpReply r = request(port(), head_of(200 + 11 * static_cast<std::size_t>(n), n - 3));
    EXPECT_EQ(r.status, n <= 100 ? 200 : 431) << n << " fields: " << r.head.substr(0, 120);
  }
  std::string cookies;  // 97 cookies, the header fields Host, Connection and Cookie: 100 fields
  for (int i = 0; i < 97; ++i) cookies += cat(i ? "; " : "", "c", i, "=", std::string(150, 'v'));
  std::string query = "/?a&b";  // two more fields
  for (const auto& [path, expected] :
       std::vector<std::pair<std::string, int>>{{"/", 200}, {query, 431}}) {
    std::string raw = cat("GET ", path, " HTTP/1.1\r\nHost: x\r\nCookie: ", cookies,
                          "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(request(port(), raw).status, expected) << path;
  }
  // Both limits at once: a 16,384-byte head, 15 KB of it one Cookie header, 100 fields, and a
  // second request pipelined behind it.
  std::string first = cat("GET / HTTP/1.1\r\nHost: x\r\nCookie: ", cookies, "\r\nX-Pad: ");
  first += std::string(ServerOptions{}.request_bytes - first.size() - 4, 'a') + "\r\n\r\n";
  ASSERT_EQ(first.size(), ServerOptions{}.request_bytes);
  int fd = connect_to(port());
  ASSERT_GE(fd, 0);
  send_all(fd, first + get_line("/"));
  std::string both;  // the two answers, until the second closes the connection
  char chunk[65536];
  for (pollfd p{fd, POLLIN, 0}; ::poll(&p, 1, 3000) > 0;) {
    ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) break;
    both.append(chunk, static_cast<std::size_t>(n));
  }
  ::close(fd);
  EXPECT_EQ(both.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << both.substr(0, 200);
  EXPECT_NE(both.find("HTTP/1.1 200 OK\r\n", 1), std::string::npos) << both.substr(0, 400);
}

// A method is an RFC 9110 token: a NUL in it (which ends the C string libmicrohttpd hands over,
// so that "GET\0" read as GET and was served), a control character or any other byte outside
// tchar is 400.
TEST_F(ServerTest, AMethodThatIsNotATokenIs400) {
  start();
  using namespace std::string_literals;
  const std::string rest = " / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  for (const std::string& method :
       {"GET\0"s, "GET\0X"s, "G\x01T"s, "\0GET"s, "GET\x7f"s, "G(T"s, "G\xc3\x89T"s, "GET\t"s}) {
    HttpReply r = request(port(), method + rest);
    EXPECT_EQ(r.status, 400) << ::testing::PrintToString(method) << " -> " << r.head.substr(0, 120);
  }
  EXPECT_EQ(request(port(), "GET" + rest).status, 200);
  EXPECT_EQ(request(port(), "GET " + rest).status, 200);  // spaces before the target: tolerated
  EXPECT_EQ(request(port(), "F!#$%&'*+-.^_`|~0o" + rest).status, 405);  // a token, not ours
}

// A wheel whose bytes changed in place (same size) is never served under its sha256.
TEST_F(ServerTest, AWheelWhoseBytesChangedIsNotServedUnderItsHash) {
  start();
  fs::path wheel = entry_ / kWheel;
  std::string good = read_file(wheel).value();
  EXPECT_EQ(request(port(), get_line(kWheelUrl)).status, 200);
  std::string bad = good;
  bad[bad.size() / 2] ^= 1;
  write_file_atomic(wheel, bad).value();  // another inode; same size, other bytes
  HttpReply r = request(port(), get_line(kWheelUrl));
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.header("ETag"), cat('"', sha256_hex(good), '"'));
  write_file_atomic(wheel, good).value();
  EXPECT_EQ(request(port(), get_line(kWheelUrl)).body, good);
}

TEST_F(ServerTest, NewBuildsAppearAndRemovedOnesGoWithoutARestart) {
  start();
  EXPECT_EQ(request(port(), get_line("/default/simple/other/")).status, 404);
  testutil::add_entry(cache_, "k2", "default", "other-2.0-py3-none-any.whl", 20);
  HttpReply r = request(port(), get_line("/default/simple/other/"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("other-2.0-py3-none-any.whl"), std::string::npos);
  // A wheel deleted behind the index's back (not through a rename) is a 404, never a torn body.
  fs::remove(cache_ / "wheels" / "k2" / "other-2.0-py3-none-any.whl");
  EXPECT_EQ(request(port(), get_line("/default/simple/other/other-2.0-py3-none-any.whl")).status,
            404);
}

TEST_F(ServerTest, TokenIsRequiredWhenSet) {
  ServerOptions opts;
  opts.token = "tok";
  start(opts);
  EXPECT_EQ(request(port(), get_line("/")).status, 401);
  EXPECT_EQ(request(port(), get_line("/", "Authorization: Bearer tok\r\n")).status, 200);
  EXPECT_EQ(request(port(), get_line("/", "Authorization: Basic a2lsbjp0b2s=\r\n")).status,
            200);  // kiln:tok
}

TEST(Server, RefusesAPortInUse) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-serve-").value();
  CacheIndex idx(dir.path());
  ServerOptions opts;
  opts.threads = 1;
  auto first = Server::start(opts, idx).value();
  opts.port = first->port();
  auto second = Server::start(opts, idx);
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().message.find(cat("cannot listen on 127.0.0.1:", first->port())),
            std::string::npos);
  EXPECT_NE(second.error().message.find("or --port 0 for a free one"), std::string::npos)
      << second.error().message;
  opts.host = "no-such-host.invalid";
  opts.port = 0;
  EXPECT_FALSE(Server::start(opts, idx));
}

}  // namespace kiln::index
