// A git pack as it arrives, checked before libgit2's indexer takes it: the pack's own bytes, its
// number of objects and every object's size (a whole object's size in its entry header; a
// delta's in the delta's own header, which states the size of the object it makes) within
// limits. libgit2 inflates a delta's object whole in memory when it indexes the pack: a 6.7 MB
// pack of one 1.5 GB blob once took kiln to 1.56 GB. The scanner inflates each entry itself as the
// bytes arrive, keeping nothing but a few bytes of each delta's header.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln::fetch {

struct PackLimits {
  std::uint64_t max_pack_bytes = 0;    // the pack as sent
  std::uint64_t max_object_bytes = 0;  // any one object, inflated
  std::uint32_t max_objects = 0;
};

class PackScanner {
 public:
  explicit PackScanner(PackLimits limits);
  ~PackScanner();
  PackScanner(const PackScanner&) = delete;
  PackScanner& operator=(const PackScanner&) = delete;

  // The next bytes of the pack. An error (BadInput: a hostile or damaged pack, a limit passed)
  // names what is wrong; after one, every call fails the same way.
  Expected<void> feed(std::string_view bytes);
  // The pack ended: every object and the trailing checksum arrived.
  Expected<void> finish();

  std::uint64_t bytes() const { return bytes_; }
  std::uint32_t objects() const { return done_; }  // entries read whole
  std::uint64_t largest_object() const { return largest_; }

 private:
  struct Inflater;
  enum class State { Header, EntryHeader, OffsetBase, RefBase, Data, Trailer, Done };
  Expected<void> step(std::string_view& in);
  Expected<void> entry_header(unsigned char c);
  Expected<void> data(std::string_view& in);
  Expected<void> fail(std::string message);
  Expected<void> check_object_size(std::uint64_t size, std::string_view what);

  PackLimits limits_;
  State state_ = State::Header;
  std::string error_;
  std::uint64_t bytes_ = 0, largest_ = 0;
  std::uint32_t count_ = 0, done_ = 0;
  std::string header_;  // the pack header (12 bytes), then each delta's first inflated bytes
  int type_ = 0;
  std::uint64_t size_ = 0, inflated_ = 0;
  unsigned shift_ = 0, base_bytes_ = 0, trailer_ = 0;
  std::unique_ptr<Inflater> inflater_;
};

}  // namespace kiln::fetch
