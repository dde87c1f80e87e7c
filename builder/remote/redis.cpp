// A Redis remote cache: each entry a string under "kiln:<name>" (GET, SET), AUTH with the token,
// and the lease of compile once: "kiln-lease:<name>" set with NX and a TTL to this worker's id,
// deleted by that worker alone (a script compares the id first). Eviction is Redis's own
// (maxmemory with an LRU policy: docs/scale.md). One connection (resp.h, kiln's own client: hiredis
// cannot bound a reply), made on first use; every request (connect, AUTH, SELECT and the command)
// has one deadline (Config::deadline, KILN_REMOTE_DEADLINE), 5 s to connect, 15 s without a byte;
// a GET's reply is bounded by the caller's max_bytes before its body is read; the other commands'
// replies are a few bytes. An error is the caller's to report (the remote then turns off for the
// run); the connection is dropped and the next request connects again.
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "core/hash.h"
#include "core/strings.h"
#include "remote/remote.h"
#include "remote/resp.h"

namespace kiln::remote {

namespace {

using resp::Reply;

// The largest reply to anything but GET (+OK, :1, an error line).
constexpr std::uint64_t kMaxSmallReply = 4096;
constexpr std::chrono::milliseconds kConnectTimeout{5000};

// A server's error line, shortened for a message.
std::string shown(const std::string& text) {
  return text.size() > 200 ? text.substr(0, 200) + "..." : text;
}

struct Address {
  std::string host;
  int port = 6379;
  int db = 0;
};

// redis://host[:port][/db]
Expected<Address> parse_address(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  Address a;
  std::string authority = rest.substr(0, rest.find('/'));
  if (rest.find('/') != std::string::npos) {
    std::string db = rest.substr(rest.find('/') + 1);
    if (!db.empty() && (db.size() > 2 || !std::all_of(db.begin(), db.end(), is_ascii_digit)))
      return Error::bad_input(cat("remote cache ", url, ": the database is a number (/0 to /99)"));
    if (!db.empty()) a.db = std::stoi(db);
  }
  auto colon = authority.rfind(':');
  a.host = authority.substr(0, colon);
  if (colon != std::string::npos) {
    std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), is_ascii_digit) ||
        std::stoi(port) == 0 || std::stoi(port) > 65535)
      return Error::bad_input(cat("remote cache ", url, ": not a port: ", port));
    a.port = std::stoi(port);
  }
  if (a.host.empty()) return Error::bad_input(cat("remote cache ", url, ": no host"));
  return a;
}

std::string worker_id() {
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  std::random_device random;
  return cat(host, ":", ::getpid(), ":", sha256_hex(std::to_string(random())).substr(0, 12));
}

class RedisRemote final : public cache::Remote {
 public:
  RedisRemote(Address address, std::string token, std::chrono::milliseconds deadline)
      : address_(std::move(address)),
        token_(std::move(token)),
        id_(worker_id()),
        deadline_(deadline) {}

  std::string describe() const override {
    return cat("redis://", address_.host, ":", address_.port, "/", address_.db);
  }

  Expected<cache::Fetched> get(const std::string& name, std::uint64_t max_bytes) override {
    const std::string key = "kiln:" + name;
    KILN_TRY(Reply reply, command({"GET", key}, max_bytes));
    if (reply.kind == Reply::Kind::Nil) return cache::Fetched::missing();
    if (reply.kind == Reply::Kind::TooLarge)
      return cache::Fetched::too_large(cat("the server announced ", reply.length,
                                           " bytes, more than the ", max_bytes,
                                           " such an entry may have (not read)"));
    if (reply.kind != Reply::Kind::Bulk) return Error::failed(cat("GET ", name, ": not a string"));
    return cache::Fetched::found(std::move(reply.text));
  }

  Expected<void> put(const std::string& name, std::string_view bytes) override {
    const std::string key = "kiln:" + name;
    KILN_TRY(Reply reply, command({"SET", key, bytes}, kMaxSmallReply));
    if (reply.kind != Reply::Kind::Status) return Error::failed(cat("SET ", name, ": not +OK"));
    return {};
  }

  bool has_leases() const override { return true; }

  Expected<bool> take_lease(const std::string& name, std::chrono::seconds ttl) override {
    const std::string key = "kiln-lease:" + name, seconds = std::to_string(ttl.count());
    KILN_TRY(Reply reply, command({"SET", key, id_, "NX", "EX", seconds}, kMaxSmallReply));
    if (reply.kind != Reply::Kind::Status && reply.kind != Reply::Kind::Nil)
      return Error::failed(cat("SET NX ", name, ": neither +OK nor nil"));
    return reply.kind == Reply::Kind::Status;
  }

  Expected<void> release_lease(const std::string& name) override {
    static constexpr std::string_view kRelease =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
        "return 0";
    const std::string key = "kiln-lease:" + name;
    KILN_TRY(Reply reply, command({"EVAL", kRelease, "1", key, id_}, kMaxSmallReply));
    return {};
  }

 private:
  // Connects (AUTH, SELECT) when there is no connection, by `deadline`.
  Expected<void> connect(const resp::Deadline& deadline) {
    if (connection_.is_open()) return {};
    KILN_TRY(connection_,
             resp::Connection::open(address_.host, address_.port, deadline, kConnectTimeout));
    const std::string db = std::to_string(address_.db);
    std::vector<std::vector<std::string_view>> setup;
    if (!token_.empty()) setup.push_back({"AUTH", token_});
    if (address_.db != 0) setup.push_back({"SELECT", db});
    for (const auto& args : setup) KILN_CHECK(raw(args, kMaxSmallReply, deadline));
    return {};
  }

  // One command; a Redis error reply or a broken connection is an error (the connection is
  // dropped, the next command connects again).
  Expected<Reply> raw(const std::vector<std::string_view>& args, std::uint64_t max_bulk,
                      const resp::Deadline& deadline) {
    auto reply = connection_.command(args, max_bulk, deadline);
    if (!reply) {
      connection_.close();
      Error e = std::move(reply).error();
      if (e.kind != ErrorKind::Interrupted) e.message = cat(args.front(), ": ", e.message);
      return e;
    }
    if (reply->kind == Reply::Kind::Error) {
      connection_.close();
      return Error::failed(cat(args.front(), ": ", shown(reply->text)));
    }
    return reply;
  }

  // A request: the connection if there is none, then the command, all within the deadline.
  Expected<Reply> command(const std::vector<std::string_view>& args, std::uint64_t max_bulk) {
    const resp::Deadline deadline = resp::Deadline::in(deadline_);
    if (auto connected = connect(deadline); !connected) {
      connection_.close();
      return std::move(connected).error();
    }
    return raw(args, max_bulk, deadline);
  }

  Address address_;
  std::string token_;
  std::string id_;
  std::chrono::milliseconds deadline_;
  resp::Connection connection_;
};

}  // namespace

Expected<std::unique_ptr<cache::Remote>> redis_remote(const Config& config) {
  KILN_TRY(Address address, parse_address(config.url));
  return std::unique_ptr<cache::Remote>(
      std::make_unique<RedisRemote>(address, config.token, config.deadline));
}

}  // namespace kiln::remote
