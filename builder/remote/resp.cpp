// kiln's RESP2 client (resp.h): a non-blocking socket, poll() in slices, bounded parsing.
#include "remote/resp.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include "core/interrupt.h"
#include "core/strings.h"

namespace kiln::remote::resp {

namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr std::size_t kChunk = std::size_t{64} << 10;  // bytes asked of recv() at a time

// Decimal digits with an optional leading '-' (when `sign`), at most 18 digits (< 2^63).
std::optional<std::int64_t> parse_number(std::string_view text, bool sign) {
  bool negative = sign && !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty() || text.size() > 18) return std::nullopt;
  std::int64_t value = 0;
  for (char c : text) {
    if (!is_ascii_digit(c)) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return negative ? -value : value;
}

Error broken(const std::string& why) {
  return Error::failed(cat("the connection broke: ", why));
}

Error malformed(const std::string& why) {
  return Error::failed(cat("not a Redis reply: ", why));
}

// "*<n>\r\n" then "$<len>\r\n<arg>\r\n" per argument.
std::string header_of(std::size_t count) {
  return cat("*", count, "\r\n");
}

}  // namespace

std::string describe_length(milliseconds length) {
  if (length.count() % 1000 == 0) return cat(length.count() / 1000, " s");
  if (length.count() < 1000) return cat(length.count(), " ms");
  return cat(length.count() / 1000, ".", length.count() % 1000 / 100, " s");
}

Connection::Connection(int fd, milliseconds idle) : fd_(fd), idle_(idle) {
  int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
}

Connection::~Connection() {
  close();
}

Connection::Connection(Connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      idle_(other.idle_),
      last_progress_(other.last_progress_),
      buffer_(std::move(other.buffer_)),
      pos_(std::exchange(other.pos_, 0)) {}

Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    idle_ = other.idle_;
    last_progress_ = other.last_progress_;
    buffer_ = std::move(other.buffer_);
    pos_ = std::exchange(other.pos_, 0);
  }
  return *this;
}

void Connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  pos_ = 0;
}

Expected<Connection> Connection::open(const std::string& host, int port, const Deadline& deadline,
                                      milliseconds connect_timeout, milliseconds idle) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  // Name resolution has no deadline of its own (getaddrinfo blocks); a numeric host needs none.
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return Error::failed(cat("cannot connect: ", host, ": ", ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(found, ::freeaddrinfo);
  Deadline connect_by = deadline;
  if (Clock::now() + connect_timeout < deadline.at) connect_by = Deadline::in(connect_timeout);
  std::string why = "no address";
  for (addrinfo* a = found; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    Connection c(fd, idle);
    c.last_progress_ = Clock::now();
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        why = std::strerror(errno);
        continue;
      }
      if (auto ready = c.wait(POLLOUT, connect_by); !ready) {
        if (ready.error().kind == ErrorKind::Interrupted) return std::move(ready).error();
        why = ready.error().message;
        continue;
      }
      int error = 0;
      socklen_t len = sizeof error;
      if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
        why = std::strerror(error ? error : errno);
        continue;
      }
    }
    int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
  }
  return Error::failed(cat("cannot connect to ", host, ":", port, ": ", why));
}

// Fails when an interrupt arrived, the deadline passed or nothing moved for `idle_`.
Expected<void> Connection::check(const Deadline& deadline) const {
  if (interrupted()) return Error::interrupted();
  const auto now = Clock::now();
  if (now >= deadline.at)
    return Error::failed(
        cat("timed out: no complete answer within ", describe_length(deadline.length)));
  if (now - last_progress_ >= idle_)
    return Error::failed(cat("timed out: nothing arrived for ",
                             describe_length(duration_cast<milliseconds>(idle_))));
  return {};
}

// Waits until the socket is ready for `events`, in slices of at most kPollSlice, with check()
// before each.
Expected<void> Connection::wait(short events, const Deadline& deadline) {
  for (;;) {
    KILN_CHECK(check(deadline));
    const auto now = Clock::now();
    auto left = std::min({duration_cast<milliseconds>(deadline.at - now),
                          duration_cast<milliseconds>(last_progress_ + idle_ - now), kPollSlice});
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left.count(), 1)));
    if (rc < 0 && errno != EINTR) return broken(std::strerror(errno));
    if (rc > 0) return {};  // ready, or an error or hang-up that the next call reports
  }
}

Expected<void> Connection::send_all(std::string_view bytes, const Deadline& deadline) {
  while (!bytes.empty()) {
    KILN_CHECK(check(deadline));
    ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      last_progress_ = Clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KILN_CHECK(wait(POLLOUT, deadline));
      continue;
    }
    return broken(n < 0 ? std::strerror(errno) : "nothing sent");
  }
  return {};
}

// Reads what has arrived (at least one byte) onto the buffer.
Expected<void> Connection::fill(const Deadline& deadline) {
  if (pos_ > 0 && pos_ == buffer_.size()) {
    buffer_.clear();
    pos_ = 0;
  } else if (pos_ >= kChunk) {
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  for (;;) {
    KILN_CHECK(check(deadline));
    const std::size_t old = buffer_.size();
    buffer_.resize(old + kChunk);
    ssize_t n = ::recv(fd_, buffer_.data() + old, kChunk, 0);
    buffer_.resize(old + static_cast<std::size_t>(std::max<ssize_t>(n, 0)));
    if (n > 0) {
      last_progress_ = Clock::now();
      return {};
    }
    if (n == 0) return broken("the server closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return broken(std::strerror(errno));
    KILN_CHECK(wait(POLLIN, deadline));
  }
}

// One line up to its CRLF (which is dropped): at most kMaxLine bytes, no CR or LF inside.
Expected<std::string> Connection::line(const Deadline& deadline) {
  std::size_t checked = 0;  // unread bytes known to start no CRLF (fill() keeps them in order)
  for (;;) {
    std::size_t end = buffer_.find("\r\n", pos_ + checked);
    if (end != std::string::npos) {
      if (end - pos_ > kMaxLine) return malformed(cat("a line over ", kMaxLine, " bytes"));
      std::string text = buffer_.substr(pos_, end - pos_);
      pos_ = end + 2;
      if (text.find_first_of("\r\n") != std::string::npos)
        return malformed("a line holds a lone CR or LF");
      return text;
    }
    const std::size_t unread = buffer_.size() - pos_;
    if (unread > kMaxLine + 1) return malformed(cat("a line over ", kMaxLine, " bytes"));
    checked = unread > 0 ? unread - 1 : 0;  // a CR at the end may start a CRLF
    KILN_CHECK(fill(deadline));
  }
}

// A bulk string's `length` bytes and its CRLF; the caller checked `length` against its bound.
Expected<std::string> Connection::bulk(std::uint64_t length, const Deadline& deadline) {
  std::string body;
  body.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(length, std::uint64_t{64} << 20)));
  const std::uint64_t want = length + 2;
  std::uint64_t have = 0;
  std::string trailer;
  while (have < want) {
    if (pos_ == buffer_.size()) KILN_CHECK(fill(deadline));
    std::size_t take =
        static_cast<std::size_t>(std::min<std::uint64_t>(want - have, buffer_.size() - pos_));
    std::string_view part(buffer_.data() + pos_, take);
    // The first `length` bytes are the body; the last two must be CRLF.
    std::size_t to_body =
        static_cast<std::size_t>(std::min<std::uint64_t>(take, have < length ? length - have : 0));
    body.append(part.substr(0, to_body));
    trailer.append(part.substr(to_body));
    pos_ += take;
    have += take;
  }
  if (trailer != "\r\n") return malformed("a bulk string does not end with CRLF");
  return body;
}

Expected<Reply> Connection::reply(std::uint64_t max_bulk, const Deadline& deadline) {
  KILN_TRY(std::string head, line(deadline));
  if (head.empty()) return malformed("an empty line");
  Reply r;
  std::string_view rest = std::string_view(head).substr(1);
  switch (head.front()) {
    case '+':
      r.kind = Reply::Kind::Status;
      r.text = rest;
      return r;
    case '-':
      r.kind = Reply::Kind::Error;
      r.text = rest;
      return r;
    case ':': {
      auto value = parse_number(rest, true);
      if (!value) return malformed("an integer reply that is not a number");
      r.kind = Reply::Kind::Integer;
      r.integer = *value;
      return r;
    }
    case '$': {
      if (rest == "-1") return r;  // nil
      auto length = parse_number(rest, false);
      if (!length) return malformed("a bulk string's length that is not a number");
      r.length = static_cast<std::uint64_t>(*length);
      if (r.length > max_bulk) {
        r.kind = Reply::Kind::TooLarge;
        close();  // its body is never read: the connection cannot be used again
        return r;
      }
      r.kind = Reply::Kind::Bulk;
      KILN_TRY(r.text, bulk(r.length, deadline));
      return r;
    }
    default:
      return malformed(cat("a reply that starts with byte ",
                           static_cast<int>(static_cast<unsigned char>(head.front())),
                           " (kiln expects +, -, : or $)"));
  }
}

Expected<Reply> Connection::command(const std::vector<std::string_view>& args,
                                    std::uint64_t max_bulk, const Deadline& deadline) {
  if (fd_ < 0) return Error::failed("not connected");
  last_progress_ = Clock::now();
  // Short pieces are gathered and sent together; a long argument (an entry) is sent as it is.
  std::string out = header_of(args.size());
  Expected<Reply> result = [&]() -> Expected<Reply> {
    for (std::string_view arg : args) {
      out += cat("$", arg.size(), "\r\n");
      if (arg.size() > kChunk) {
        KILN_CHECK(send_all(out, deadline));
        KILN_CHECK(send_all(arg, deadline));
        out = "\r\n";
      } else {
        out.append(arg).append("\r\n");
      }
    }
    KILN_CHECK(send_all(out, deadline));
    return reply(max_bulk, deadline);
  }();
  if (!result) close();
  return result;
}

}  // namespace kiln::remote::resp
