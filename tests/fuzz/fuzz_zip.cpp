// The strict zip reader (wheels): an archive it accepts has only safe, distinct names and entries
// inside the image, and every entry reads back (or fails with a message) without crashing.
#include <set>

#include "archive/zip_reader.h"
#include "fuzz.h"

using kiln::fuzz::fail;

KILN_FUZZ_TARGET(zip) {
  auto zip =
      kiln::archive::ZipReader::from_bytes(std::string(kiln::fuzz::text(data, size)), "fuzz.whl");
  if (!zip) {
    if (zip.error().message.empty()) fail("an error without a message");
    return 0;
  }
  std::set<std::string> seen;
  for (const auto& e : zip->entries()) {
    if (!kiln::archive::zip_name_problem(e.name).empty())
      fail("an accepted entry name has a problem: " + e.name);
    if (!seen.insert(e.name).second) fail("a duplicate entry was accepted: " + e.name);
    if (e.data_offset > size || e.compressed_size > size - e.data_offset)
      fail("an entry reaches past the image");
    if (zip->find(e.name) == nullptr) fail("find() misses an entry");
    auto bytes = zip->read(e, 1u << 20);
    if (bytes && bytes->size() != e.size) fail("read() returned another size than the directory's");
    if (e.size > (4u << 20))
      continue;  // (inflating bombs is the reader's job to bound, not the fuzzer's)
    std::uint64_t streamed = 0;
    auto chunks = zip->read_chunks(e, [&](std::string_view c) { streamed += c.size(); });
    if (bytes && !chunks) fail("read() succeeded where read_chunks() failed");
    if (chunks && streamed != e.size)
      fail("read_chunks() streamed another size than the directory's");
  }
  return 0;
}
