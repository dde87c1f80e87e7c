#include "fetch/git_stream.h"

#include <fcntl.h>
#include <git2.h>
#include <git2/sys/stream.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/fs.h"
#include "core/interrupt.h"
#include "core/strings.h"

namespace kiln::fetch {

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// The deadline of this thread's fetch (0: none set) and whether I/O stopped at it.
thread_local double t_deadline = 0;
thread_local bool t_passed = false;

// libgit2's own socket stream has this layout (streams/socket.h): its SSH transport reads the
// descriptor through it, so kiln's stream keeps the same first fields.
struct Stream {
  git_stream parent;
  char* host;
  char* port;
  int s;
  double deadline;
};

int stream_error(const std::string& message) {
  git_error_set_str(GIT_ERROR_NET, message.c_str());
  return -1;
}

// Waits until `fd` is ready for `events`; -1 (the error set) at the deadline or an interrupt.
int wait_ready(const Stream& st, short events) {
  for (;;) {
    if (interrupted()) return stream_error("interrupted");
    double left = st.deadline - now();
    if (st.deadline > 0 && left <= 0) {
      t_passed = true;
      return stream_error(cat("no answer from ", st.host, " within the fetch's deadline"));
    }
    int slice = st.deadline > 0 && left < 0.1 ? static_cast<int>(left * 1000) + 1 : 100;
    pollfd p{st.s, events, 0};
    int rc = ::poll(&p, 1, slice);
    if (rc > 0) return 0;
    if (rc < 0 && errno != EINTR) return stream_error(cat("poll: ", std::strerror(errno)));
  }
}

int connect_one(Stream& st, const addrinfo* ai) {
  st.s = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
  if (st.s < 0) return -1;
  if (::connect(st.s, ai->ai_addr, ai->ai_addrlen) == 0) return 0;
  if (errno == EINPROGRESS && wait_ready(st, POLLOUT) == 0) {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(st.s, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) return 0;
    errno = err;
  }
  ::close(st.s);
  st.s = -1;
  return -1;
}

int stream_connect(git_stream* stream) {
  auto* st = reinterpret_cast<Stream*>(stream);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  if (int rc = ::getaddrinfo(st->host, st->port, &hints, &list); rc != 0)
    return stream_error(cat("cannot resolve ", st->host, ": ", ::gai_strerror(rc)));
  std::string why = "no address";
  for (const addrinfo* ai = list; ai; ai = ai->ai_next) {
    if (connect_one(*st, ai) == 0) break;
    if (t_passed || interrupted()) break;
    why = std::strerror(errno);
  }
  ::freeaddrinfo(list);
  if (st->s < 0)
    return t_passed || interrupted()
               ? -1
               : stream_error(cat("cannot connect to ", st->host, ":", st->port, ": ", why));
  // Blocking again for libssh2, which uses the descriptor itself; reads and writes here poll first
  // and never block.
  ::fcntl(st->s, F_SETFL, ::fcntl(st->s, F_GETFL) & ~O_NONBLOCK);
  return 0;
}

ssize_t stream_read(git_stream* stream, void* data, size_t len) {
  auto* st = reinterpret_cast<Stream*>(stream);
  for (;;) {
    if (wait_ready(*st, POLLIN) != 0) return -1;
    ssize_t n = ::recv(st->s, data, len, MSG_DONTWAIT);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return stream_error(cat("cannot read from ", st->host, ": ", std::strerror(errno)));
  }
}

ssize_t stream_write(git_stream* stream, const char* data, size_t len, int) {
  auto* st = reinterpret_cast<Stream*>(stream);
  for (;;) {
    if (wait_ready(*st, POLLOUT) != 0) return -1;
    ssize_t n = ::send(st->s, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return n;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return stream_error(cat("cannot write to ", st->host, ": ", std::strerror(errno)));
  }
}

int stream_close(git_stream* stream) {
  auto* st = reinterpret_cast<Stream*>(stream);
  if (st->s >= 0) ::close(st->s);
  st->s = -1;
  return 0;
}

void stream_free(git_stream* stream) {
  auto* st = reinterpret_cast<Stream*>(stream);
  stream_close(stream);
  std::free(st->host);
  std::free(st->port);
  delete st;
}

int stream_init(git_stream** out, const char* host, const char* port) {
  auto* st = new Stream{};
  st->parent.version = GIT_STREAM_VERSION;
  st->parent.connect = stream_connect;
  st->parent.read = stream_read;
  st->parent.write = stream_write;
  st->parent.close = stream_close;
  st->parent.free = stream_free;
  st->host = ::strdup(host);
  st->port = ::strdup(port);
  st->s = -1;
  st->deadline = t_deadline;
  *out = &st->parent;
  return 0;
}

}  // namespace

Expected<std::int64_t> git_deadline_seconds() {
  std::string text = env_value("KILN_GIT_DEADLINE");
  if (text.empty()) return 30 * 60;
  auto seconds = parse_duration(text);
  if (!seconds || *seconds < 1 || *seconds > 86400)
    return Error::bad_input(cat("KILN_GIT_DEADLINE=", printable_excerpt(text, 40),
                                ": expected a duration of 1s to 1d (e.g. 90s, 30m, 2h)"));
  return *seconds;
}

GitDeadline::GitDeadline(std::int64_t seconds) {
  t_deadline = now() + static_cast<double>(seconds);
  t_passed = false;
}

GitDeadline::~GitDeadline() {
  t_deadline = 0;
}

bool GitDeadline::passed() {
  if (t_deadline > 0 && now() >= t_deadline) t_passed = true;
  return t_passed;
}

void register_git_stream() {
  static std::once_flag once;
  std::call_once(once, [] {
    git_stream_registration r{};
    r.version = GIT_STREAM_VERSION;
    r.init = stream_init;
    git_stream_register(GIT_STREAM_STANDARD, &r);
  });
}

}  // namespace kiln::fetch
