// A small Redis client of kiln's own (RESP2 over TCP), for the few commands the Redis remote sends
// (AUTH, SELECT, GET, SET, SET NX EX, EVAL). hiredis cannot bound a bulk reply: a server that
// announced 10^11 bytes grew kiln with whatever it sent. Here every call has
//   - a bound: a bulk reply whose announced length is over the caller's `max_bulk` is refused
//     before a byte of its body is read (Reply::Kind::TooLarge; the connection is closed, since the
//     rest of that reply is never read); status, error and integer lines are at most kMaxLine
//     bytes;
//   - a deadline for the whole request (connect, send, reply), not per byte, and an idle limit (no
//     byte for `idle`): a server that sends one byte every few seconds is cut off at the deadline;
//   - interrupt checks: the socket is polled in slices of at most 200 ms and SIGINT/SIGTERM
//     (core/interrupt.h) end the call with Error::interrupted().
// Replies are parsed strictly: `+`, `-`, `:`, `$` (and `$-1`, nil) only; arrays and RESP3 types
// are refused (no command kiln sends returns them), as is any malformed line. Any error closes the
// connection; the next command connects again.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::remote::resp {

using Clock = std::chrono::steady_clock;

// The longest status, error or integer line (and bulk length line) a reply may have.
inline constexpr std::size_t kMaxLine = std::size_t{64} << 10;
// How long poll() waits at most before checking for an interrupt.
inline constexpr std::chrono::milliseconds kPollSlice{200};

// When a request must be done by; `length` is what messages say.
struct Deadline {
  Clock::time_point at;
  std::chrono::milliseconds length{0};
  static Deadline in(std::chrono::milliseconds length) { return {Clock::now() + length, length}; }
};

struct Reply {
  enum class Kind {
    Status,    // +OK
    Error,     // -ERR ...: `text`
    Integer,   // :1
    Bulk,      // $3\r\nabc: `text`
    Nil,       // $-1
    TooLarge,  // a bulk reply announced more than max_bulk: `length` is what it announced
  };
  Kind kind = Kind::Nil;
  std::string text;
  std::int64_t integer = 0;
  std::uint64_t length = 0;
};

class Connection {
 public:
  Connection() = default;
  // Adopts a connected stream socket (tests: one end of a socketpair); made non-blocking.
  explicit Connection(int fd, std::chrono::milliseconds idle = std::chrono::seconds(15));
  ~Connection();
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // A TCP connection to host:port, made by `deadline` and at most `connect_timeout`.
  static Expected<Connection> open(const std::string& host, int port, const Deadline& deadline,
                                   std::chrono::milliseconds connect_timeout,
                                   std::chrono::milliseconds idle = std::chrono::seconds(15));

  bool is_open() const { return fd_ >= 0; }
  void close();

  // Sends one command and reads its reply, all by `deadline`. A bulk reply longer than
  // `max_bulk` is Kind::TooLarge (and the connection closed). An error (timed out, idle too long,
  // interrupted, broken, malformed) closes the connection.
  Expected<Reply> command(const std::vector<std::string_view>& args, std::uint64_t max_bulk,
                          const Deadline& deadline);

 private:
  Expected<void> check(const Deadline& deadline) const;
  Expected<void> send_all(std::string_view bytes, const Deadline& deadline);
  Expected<void> wait(short events, const Deadline& deadline);
  Expected<void> fill(const Deadline& deadline);
  Expected<std::string> line(const Deadline& deadline);
  Expected<std::string> bulk(std::uint64_t length, const Deadline& deadline);
  Expected<Reply> reply(std::uint64_t max_bulk, const Deadline& deadline);

  int fd_ = -1;
  std::chrono::milliseconds idle_{15000};
  Clock::time_point last_progress_{};
  std::string buffer_;  // bytes received and not yet parsed, from `pos_`
  std::size_t pos_ = 0;
};

// "3 s", "1.5 s", "500 ms": a deadline's length for messages.
std::string describe_length(std::chrono::milliseconds length);

}  // namespace kiln::remote::resp
