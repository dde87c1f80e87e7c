// A git pack from a hostile server, as fetch/git_pack's scanner takes it before libgit2's indexer:
// the first byte chooses the chunk size, the rest is the pack. Neither a crash nor a limit passed:
// what is accepted stays within the limits, and a refusal sticks.
#include "fetch/git_pack.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(git_pack) {
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 97;
  std::string_view pack = kiln::fuzz::text(data + 1, size - 1);
  const kiln::fetch::PackLimits limits{1 << 20, 1 << 16, 64};
  kiln::fetch::PackScanner scanner(limits);
  bool refused = false;
  for (std::size_t at = 0; at < pack.size() && !refused; at += chunk)
    refused = !scanner.feed(pack.substr(at, chunk));
  if (refused && scanner.feed("x")) fail("a refused pack took more bytes");
  if (scanner.largest_object() > limits.max_object_bytes && !refused)
    fail("an object past the limit was taken");
  if (scanner.objects() > limits.max_objects) fail("more objects than the limit were read");
  if (scanner.finish() && (refused || scanner.bytes() != pack.size()))
    fail("a pack was finished after a refusal, or without all its bytes");
  return 0;
}
