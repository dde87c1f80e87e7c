// A Redis remote cache: each entry a string under "kiln:<name>" (GET, SET), AUTH with the token,
// and the lease of compile once: "kiln-lease:<name>" set with NX and a TTL to this worker's id,
// deleted by that worker alone (a script compares the id first). Eviction is Redis's own
// (maxmemory with an LRU policy: docs/scale.md). One connection, made on first use, with short
// timeouts; an error is the caller's to report (the remote then turns off for the run).
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <random>
#include <vector>

#include "core/hash.h"
#include "core/strings.h"
#include "remote/remote.h"

namespace kiln::remote {

namespace {

using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

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
    if (!db.empty() && (db.size() > 2 || !std::all_of(db.begin(), db.end(), ::isdigit)))
      return Error::bad_input(cat("remote cache ", url, ": the database is a number (/0 to /99)"));
    if (!db.empty()) a.db = std::stoi(db);
  }
  auto colon = authority.rfind(':');
  a.host = authority.substr(0, colon);
  if (colon != std::string::npos) {
    std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
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
  RedisRemote(Address address, std::string token)
      : address_(std::move(address)), token_(std::move(token)), id_(worker_id()) {}

  std::string describe() const override {
    return cat("redis://", address_.host, ":", address_.port, "/", address_.db);
  }

  Expected<std::optional<std::string>> get(const std::string& name) override {
    KILN_TRY(Reply reply, command({"GET", "kiln:" + name}));
    if (reply->type == REDIS_REPLY_NIL) return std::nullopt;
    if (reply->type != REDIS_REPLY_STRING)
      return Error::failed(cat("GET ", name, ": not a string"));
    return std::optional<std::string>(std::string(reply->str, reply->len));
  }

  Expected<void> put(const std::string& name, std::string_view bytes) override {
    KILN_TRY(Reply reply, command({"SET", "kiln:" + name, std::string(bytes)}));
    return {};
  }

  bool has_leases() const override { return true; }

  Expected<bool> take_lease(const std::string& name, std::chrono::seconds ttl) override {
    KILN_TRY(Reply reply,
             command({"SET", "kiln-lease:" + name, id_, "NX", "EX", std::to_string(ttl.count())}));
    return reply->type == REDIS_REPLY_STATUS;
  }

  Expected<void> release_lease(const std::string& name) override {
    static const char* const kRelease =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
        "return 0";
    KILN_TRY(Reply reply, command({"EVAL", kRelease, "1", "kiln-lease:" + name, id_}));
    return {};
  }

 private:
  Expected<void> connect() {
    if (context_) return {};
    const timeval connect_timeout{2, 0}, io_timeout{15, 0};
    context_.reset(redisConnectWithTimeout(address_.host.c_str(), address_.port, connect_timeout));
    if (!context_ || context_->err) {
      std::string why = context_ ? context_->errstr : "cannot allocate a connection";
      context_.reset();
      return Error::failed(cat("cannot connect: ", why));
    }
    redisSetTimeout(context_.get(), io_timeout);
    std::vector<std::vector<std::string>> setup;
    if (!token_.empty()) setup.push_back({"AUTH", token_});
    if (address_.db != 0) setup.push_back({"SELECT", std::to_string(address_.db)});
    for (const auto& args : setup) {
      auto reply = raw(args);
      if (!reply) {
        context_.reset();
        return std::move(reply).error();
      }
    }
    return {};
  }

  // One command; a Redis error reply or a broken connection is an error (the connection is
  // dropped, the next command connects again).
  Expected<Reply> raw(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lengths;
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    Reply reply(static_cast<redisReply*>(redisCommandArgv(
                    context_.get(), static_cast<int>(argv.size()), argv.data(), lengths.data())),
                freeReplyObject);
    if (!reply) {
      std::string why = context_->errstr;
      context_.reset();
      return Error::failed(cat(args.front(), ": ", why));
    }
    if (reply->type == REDIS_REPLY_ERROR)
      return Error::failed(cat(args.front(), ": ", std::string(reply->str, reply->len)));
    return reply;
  }

  Expected<Reply> command(const std::vector<std::string>& args) {
    KILN_CHECK(connect());
    return raw(args);
  }

  Address address_;
  std::string token_;
  std::string id_;
  std::unique_ptr<redisContext, decltype(&redisFree)> context_{nullptr, redisFree};
};

}  // namespace

Expected<std::unique_ptr<cache::Remote>> redis_remote(const Config& config) {
  KILN_TRY(Address address, parse_address(config.url));
  return std::unique_ptr<cache::Remote>(std::make_unique<RedisRemote>(address, config.token));
}

}  // namespace kiln::remote
