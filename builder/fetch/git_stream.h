// libgit2's network I/O through kiln's own socket stream (git_stream_register for plain sockets,
// which libgit2's TLS stream is layered on too: git://, http:// and https://). libgit2 1.5 has no
// timeouts of its own: a server that accepts and sends nothing held `kiln prepare` until it was
// killed. Every connect, read and write here waits at most until the fetch's deadline (a deadline
// for the whole fetch, not an idle timeout) and yields to SIGINT/SIGTERM within 100 ms.
#pragma once

#include <cstdint>

#include "core/expected.h"

namespace kiln::fetch {

// $KILN_GIT_DEADLINE: seconds a git fetch may take in all (parse_duration's form, 1 s to 1 d);
// 30 minutes when unset.
Expected<std::int64_t> git_deadline_seconds();

// While one lives, the streams this thread opens (and the fetch's progress callbacks, through
// passed()) stop at `seconds` from now.
class GitDeadline {
 public:
  explicit GitDeadline(std::int64_t seconds);
  ~GitDeadline();
  GitDeadline(const GitDeadline&) = delete;
  GitDeadline& operator=(const GitDeadline&) = delete;
  // Whether the deadline has passed (and I/O stopped because of it).
  static bool passed();
};

// Registers the stream with libgit2 (once; after git_libgit2_init).
void register_git_stream();

}  // namespace kiln::fetch
