// kiln's RESP client (remote/resp.h) and the bounds and deadlines of both remote backends
// (remote/redis.cpp, remote/http.cpp) through cache::SharedCache: every reply kind, malformed and
// random input, a bulk length over the caller's bound refused before its body is read, a server
// that sends one byte per 100 ms cut off at a 1 s deadline, SIGTERM ending a request within a
// second, and KILN_REMOTE_DEADLINE. The servers are threads of this process on 127.0.0.1 (or one
// end of a socketpair); tests/e2e/test_remote_limits.py runs the same faults against `kiln build`.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cache/remote.h"
#include "core/fs.h"
#include "core/interrupt.h"
#include "core/strings.h"
#include "remote/remote.h"
#include "remote/resp.h"

namespace kiln {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using remote::resp::Connection;
using remote::resp::Deadline;
using remote::resp::Reply;
using Clock = std::chrono::steady_clock;
using namespace std::string_literals;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void send_text(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

// What has arrived on `fd` within `wait` (empty: nothing, or the peer closed).
std::string receive(int fd, std::chrono::milliseconds wait = 2000ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) <= 0) return {};
  char buf[65536];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

// A connected pair: kiln's Connection on one end, the test's "server" on the other.
struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    client = Connection(fds[0]);
    server = fds[1];
  }
  ~Pair() {
    if (server >= 0) ::close(server);
  }
  // The reply to a GET when the server has sent `bytes` and then closed its end (`close`).
  Expected<Reply> get(std::string_view bytes, std::uint64_t max_bulk = 1 << 20, bool close = true,
                      std::chrono::milliseconds deadline = 2000ms) {
    send_text(server, bytes);
    if (close) ::shutdown(server, SHUT_WR);
    return client.command({"GET", "k"}, max_bulk, Deadline::in(deadline));
  }
  Connection client;
  int server = -1;
};

// A TCP server on 127.0.0.1 for one test: `serve` runs for each connection in turn, on a thread of
// the server's, until the connection closes or the server stops.
class FakeServer {
 public:
  using Serve = std::function<void(int fd, const std::atomic<bool>& stop)>;
  explicit FakeServer(Serve serve) : serve_(std::move(serve)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_, 8), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  ~FakeServer() {
    stop_ = true;
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  int connections() const { return connections_; }

 private:
  void run() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      connections_++;
      serve_(fd, stop_);
      ::close(fd);
    }
  }
  Serve serve_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

// Sends `head`, then one byte of `body` every `every` until stopped or the client goes.
void trickle(int fd, const std::atomic<bool>& stop, std::string_view head, char body,
             std::chrono::milliseconds every) {
  send_text(fd, head);
  for (int i = 0; i < 600 && !stop; ++i) {
    std::this_thread::sleep_for(every);
    if (::send(fd, &body, 1, MSG_NOSIGNAL) != 1) return;
  }
}

std::string resp_command(std::initializer_list<std::string_view> args) {
  std::string out = cat("*", args.size(), "\r\n");
  for (auto a : args) out += cat("$", a.size(), "\r\n", a, "\r\n");
  return out;
}

std::unique_ptr<cache::Remote> open(const std::string& url, std::chrono::milliseconds deadline,
                                    const std::string& token = "") {
  remote::Config config;
  config.url = url;
  config.token = token;
  config.deadline = deadline;
  return remote::open_remote(config).value();
}

}  // namespace

TEST(RespParser, EveryReplyKind) {
  {
    Pair p;
    auto r = p.get("+OK\r\n");
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->kind, Reply::Kind::Status);
    EXPECT_EQ(r->text, "OK");
    // The command went out as RESP.
    EXPECT_EQ(receive(p.server), resp_command({"GET", "k"}));
  }
  struct Case {
    std::string bytes;
    Reply::Kind kind;
    std::string text;
    std::int64_t integer;
  };
  for (const Case& c : std::vector<Case>{
           {"-ERR wrong\r\n", Reply::Kind::Error, "ERR wrong", 0},
           {":42\r\n", Reply::Kind::Integer, "", 42},
           {":-3\r\n", Reply::Kind::Integer, "", -3},
           {"$3\r\nabc\r\n", Reply::Kind::Bulk, "abc", 0},
           {"$0\r\n\r\n", Reply::Kind::Bulk, "", 0},
           {"$6\r\na\r\n\0b\n\r\n"s, Reply::Kind::Bulk, "a\r\n\0b\n"s, 0},
           {"$-1\r\n", Reply::Kind::Nil, "", 0},
       }) {
    Pair p;
    auto r = p.get(c.bytes);
    ASSERT_TRUE(r) << c.bytes << ": " << r.error().message;
    EXPECT_EQ(r->kind, c.kind) << c.bytes;
    EXPECT_EQ(r->text, c.text) << c.bytes;
    EXPECT_EQ(r->integer, c.integer) << c.bytes;
  }
  // Two replies on one connection, and a bulk string that arrives in pieces.
  Pair p;
  send_text(p.server, "+OK\r\n$5\r\nhel");
  auto first = p.client.command({"SET", "k", "v"}, 100, Deadline::in(2s));
  ASSERT_TRUE(first && first->kind == Reply::Kind::Status);
  std::thread rest([&] {
    std::this_thread::sleep_for(50ms);
    send_text(p.server, "lo\r\n");
  });
  auto second = p.client.command({"GET", "k"}, 100, Deadline::in(2s));
  rest.join();
  ASSERT_TRUE(second) << second.error().message;
  EXPECT_EQ(second->text, "hello");
}

TEST(RespParser, MalformedRepliesAreErrorsAndCloseTheConnection) {
  for (const std::string& bytes : std::vector<std::string>{
           "*1\r\n$1\r\na\r\n",  // an array: no command kiln sends returns one
           "_\r\n",              // RESP3 null
           "%1\r\n",             // RESP3 map
           "\r\n",               // an empty line
           ":\r\n",
           ":abc\r\n",
           ":1x\r\n",                       // not integers
           ":12345678901234567890123\r\n",  // too many digits
           "$abc\r\n",
           "$-2\r\n",
           "$+3\r\n",
           "$\r\n",
           "$3 \r\nabc\r\n",
           "$3\r\nabcd\r\n",  // the body is not followed by CRLF
           "$3\r\nab",        // cut short
           "+OK",             // no CRLF before the end
           "+O\nK\r\n",       // a lone LF in a line
           "+O\rK\r\n",       // a lone CR
           "",                // nothing at all
           "\0\r\n"s,
       }) {
    Pair p;
    auto r = p.get(bytes);
    EXPECT_FALSE(r) << "accepted: " << bytes;
    EXPECT_FALSE(p.client.is_open()) << bytes;
  }
  // A line longer than kMaxLine fails once the bound is passed, without waiting for its end.
  Pair p;
  auto start = Clock::now();
  auto r = p.get("+" + std::string(remote::resp::kMaxLine + 10, 'a'), 100, false, 5000ms);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("a line over 65536 bytes"), std::string::npos)
      << r.error().message;
  EXPECT_LT(seconds_since(start), 2.0);
}

// No byte sequence crashes the parser or makes it wait past the end of its input.
TEST(RespParser, RandomBytesNeverCrash) {
  std::mt19937 random(31);
  const std::string alphabet = "+-:$*_\r\n0123456789-abc\0\xff"s;
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    std::size_t n = random() % 40;
    for (std::size_t j = 0; j < n; ++j)
      bytes += random() % 4 == 0 ? static_cast<char>(random() % 256)
                                 : alphabet[random() % alphabet.size()];
    Pair p;
    auto r = p.get(bytes, 16);
    if (r && r->kind == Reply::Kind::TooLarge) {
      EXPECT_GT(r->length, 16u);
    }
    if (r && r->kind == Reply::Kind::Bulk) {
      EXPECT_LE(r->text.size(), 16u);
    }
  }
}

TEST(RespParser, ABulkLengthOverTheBoundIsRefusedBeforeItsBodyIsRead) {
  {
    Pair p;
    auto r = p.get("$5\r\nhello\r\n", 5);
    ASSERT_TRUE(r && r->kind == Reply::Kind::Bulk);  // exactly the bound
  }
  {
    Pair p;
    auto r = p.get("$5\r\nhello\r\n", 4);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->kind, Reply::Kind::TooLarge);
    EXPECT_EQ(r->length, 5u);
  }
  // 10^11 bytes announced, a few sent, the connection left open: refused at once.
  Pair p;
  auto start = Clock::now();
  auto r = p.get("$100000000000\r\n" + std::string(1000, 'x'), 1 << 20, false, 5000ms);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->kind, Reply::Kind::TooLarge);
  EXPECT_EQ(r->length, 100000000000u);
  EXPECT_TRUE(r->text.empty());
  EXPECT_FALSE(p.client.is_open());  // the rest of that reply is never read
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(RespClient, AServerSendingOneBytePer100MsHitsTheDeadline) {
  FakeServer server([](int fd, const std::atomic<bool>& stop) {
    (void)receive(fd);
    trickle(fd, stop, "$100\r\n", 'x', 100ms);
  });
  auto start = Clock::now();
  auto c = Connection::open("127.0.0.1", server.port(), Deadline::in(1000ms), 1000ms);
  ASSERT_TRUE(c) << c.error().message;
  auto r = c->command({"GET", "k"}, 1000, Deadline::in(1000ms));
  const double took = seconds_since(start);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "timed out: no complete answer within 1 s");
  EXPECT_GT(took, 0.9);
  EXPECT_LT(took, 1.6);
}

TEST(RespClient, NothingArrivingForTheIdleLimitEndsTheCall) {
  FakeServer server([](int fd, const std::atomic<bool>& stop) {
    while (!stop && !receive(fd, 50ms).empty()) {
    }
    while (!stop) std::this_thread::sleep_for(20ms);
  });
  auto c = Connection::open("127.0.0.1", server.port(), Deadline::in(5000ms), 1000ms, 300ms);
  ASSERT_TRUE(c) << c.error().message;
  auto start = Clock::now();
  auto r = c->command({"GET", "k"}, 1000, Deadline::in(5000ms));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "timed out: nothing arrived for 300 ms");
  EXPECT_LT(seconds_since(start), 1.0);
}

TEST(RespClient, ARefusedConnectionIsAnError) {
  int port = 0;
  {
    FakeServer closed([](int, const std::atomic<bool>&) {});
    port = closed.port();
  }
  auto c = Connection::open("127.0.0.1", port, Deadline::in(1000ms), 1000ms);
  ASSERT_FALSE(c);
  EXPECT_NE(c.error().message.find("cannot connect to 127.0.0.1:"), std::string::npos)
      << c.error().message;
}

// SIGTERM mid-request (a server that never answers, a deadline of a minute) ends the call within
// a second with Error::interrupted(). In a child process: the interrupt flag stays set.
TEST(RespClientDeathTest, SigtermEndsARequestWithinASecond) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto body = [] {
    install_interrupt_handlers();
    Pair p;
    std::thread signal([] {
      std::this_thread::sleep_for(300ms);
      ::kill(::getpid(), SIGTERM);
    });
    auto start = Clock::now();
    auto r = p.client.command({"GET", "k"}, 1000, Deadline::in(60000ms));
    const double took = seconds_since(start);
    signal.join();
    bool ok = !r && r.error().kind == ErrorKind::Interrupted && took < 1.3;
    std::fprintf(stderr, "took %.2f s: %s\n", took, r ? "a reply" : r.error().message.c_str());
    std::exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(body(), ::testing::ExitedWithCode(0), "took 0\\.[0-9]+ s: interrupted");
}

// Through the Redis backend and SharedCache: a reply over the bound is a corrupt miss (the remote
// stays on, and the next request connects again); AUTH and SELECT go first.
TEST(RemoteRedis, AReplyOverTheBoundIsACorruptMissAndTheRemoteStaysOn) {
  std::vector<std::string> seen;
  FakeServer server([&](int fd, const std::atomic<bool>& stop) {
    for (std::string got; !stop && !(got = receive(fd, 3000ms)).empty();) {
      seen.push_back(got);
      if (got.find("AUTH") != std::string::npos || got.find("SELECT") != std::string::npos) {
        send_text(fd, "+OK\r\n");
      } else if (got.find("huge") != std::string::npos) {
        trickle(fd, stop, "$100000000000\r\n", 'x', 1ms);  // until kiln hangs up
        return;
      } else if (got.find("small") != std::string::npos) {
        std::string entry = cache::frame_entry("ok");
        send_text(fd, cat("$", entry.size(), "\r\n", entry, "\r\n"));
      } else {
        send_text(fd, "$-1\r\n");
      }
    }
  });
  cache::SharedCache shared(open(cat("redis://127.0.0.1:", server.port(), "/3"), 5000ms, "pw"),
                            false);
  auto start = Clock::now();
  EXPECT_EQ(shared.get("wheels/huge/entry.json", cache::kMaxRemoteEntryJson), std::nullopt);
  EXPECT_LT(seconds_since(start), 2.0);
  EXPECT_TRUE(shared.on());
  EXPECT_EQ(shared.stats().corrupt, 1u);
  EXPECT_EQ(shared.get("objects/ab/small.o", cache::kMaxRemoteObject), "ok");
  EXPECT_EQ(shared.get("objects/ab/none.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_EQ(shared.stats().hits, 1u);
  EXPECT_EQ(server.connections(), 2);
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0], resp_command({"AUTH", "pw"}));
  EXPECT_EQ(seen[1], resp_command({"SELECT", "3"}));
  EXPECT_EQ(seen[2], resp_command({"GET", "kiln:wheels/huge/entry.json"}));
}

TEST(RemoteRedis, ASlowServerIsCutOffAtTheDeadlineAndTheRemoteTurnsOff) {
  FakeServer server([](int fd, const std::atomic<bool>& stop) {
    (void)receive(fd);
    trickle(fd, stop, "$1000\r\n", 'x', 100ms);
  });
  cache::SharedCache shared(open(cat("redis://127.0.0.1:", server.port()), 1000ms), false);
  auto start = Clock::now();
  EXPECT_EQ(shared.get("objects/ab/x.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_LT(seconds_since(start), 1.6);
  EXPECT_FALSE(shared.on());
  EXPECT_EQ(shared.get("objects/ab/x.o", cache::kMaxRemoteObject), std::nullopt);
  EXPECT_EQ(server.connections(), 1);  // never asked again
}

// The HTTP backend: a Content-Length over the bound is refused before the body (a corrupt miss);
// a body that trickles is cut off at the deadline, not kept alive by its bytes.
TEST(RemoteHttp, AContentLengthOverTheBoundIsACorruptMissAndASlowBodyHitsTheDeadline) {
  std::atomic<int> served{0};
  FakeServer server([&](int fd, const std::atomic<bool>& stop) {
    std::string request = receive(fd);
    served++;
    if (request.find("/huge") != std::string::npos) {
      trickle(fd, stop, "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n", 'x', 1ms);
    } else {
      trickle(fd, stop, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", 'x', 100ms);
    }
  });
  cache::SharedCache shared(open(cat("http://127.0.0.1:", server.port(), "/"), 1000ms), false);
  auto start = Clock::now();
  EXPECT_EQ(shared.get("wheels/huge/entry.json", cache::kMaxRemoteEntryJson), std::nullopt);
  EXPECT_LT(seconds_since(start), 1.0);
  EXPECT_TRUE(shared.on());
  EXPECT_EQ(shared.stats().corrupt, 1u);
  start = Clock::now();
  EXPECT_EQ(shared.get("objects/ab/slow.o", cache::kMaxRemoteObject), std::nullopt);
  const double took = seconds_since(start);
  EXPECT_GT(took, 0.9);
  EXPECT_LT(took, 2.0);
  EXPECT_FALSE(shared.on());
  EXPECT_EQ(served.load(), 2);
}

TEST(RemoteDeadline, FromKilnRemoteDeadline) {
  TempDir dir = TempDir::create(fs::temp_directory_path(), "kiln-deadline-").value();
  fs::create_directories(dir.path() / "cache");
  ::unsetenv("KILN_REMOTE_CACHE");
  ::unsetenv("KILN_REMOTE_DEADLINE");
  auto load = [&] { return remote::load_config("redis://x", false, dir.path() / "cache"); };
  EXPECT_EQ(load().value().deadline, std::chrono::milliseconds(120000));
  ::setenv("KILN_REMOTE_DEADLINE", "3s", 1);
  EXPECT_EQ(load().value().deadline, std::chrono::milliseconds(3000));
  ::setenv("KILN_REMOTE_DEADLINE", "2m", 1);
  EXPECT_EQ(load().value().deadline, std::chrono::milliseconds(120000));
  for (const char* bad : {"0s", "abc", "500ms", "3", "2d", "-1s"}) {
    ::setenv("KILN_REMOTE_DEADLINE", bad, 1);
    auto c = load();
    ASSERT_FALSE(c) << bad;
    EXPECT_EQ(c.error().kind, ErrorKind::BadInput);
    EXPECT_NE(c.error().message.find("KILN_REMOTE_DEADLINE="), std::string::npos);
  }
  ::unsetenv("KILN_REMOTE_DEADLINE");
}

}  // namespace kiln
