#include "fetch/git_pack.h"

#include <zlib.h>

#include <algorithm>
#include <optional>

#include "core/strings.h"

namespace kiln::fetch {

namespace {

constexpr std::size_t kHeaderBytes = 12;     // "PACK", version, object count
constexpr unsigned kTrailerBytes = 20;       // the SHA-1 of what came before
constexpr unsigned kRefBaseBytes = 20;       // a REF_DELTA's base object id
constexpr unsigned kMaxOffsetBytes = 10;     // an OFS_DELTA's base offset: 64 bits in 7-bit groups
constexpr std::size_t kDeltaHeadBytes = 20;  // a delta's two sizes: at most 10 bytes each

std::uint32_t be32(std::string_view b) {
  return (std::uint32_t(static_cast<unsigned char>(b[0])) << 24) |
         (std::uint32_t(static_cast<unsigned char>(b[1])) << 16) |
         (std::uint32_t(static_cast<unsigned char>(b[2])) << 8) |
         std::uint32_t(static_cast<unsigned char>(b[3]));
}

// A delta's little-endian base-128 size at `at` (advanced past it); nullopt when the bytes end
// first or it is longer than 64 bits.
std::optional<std::uint64_t> delta_size(std::string_view b, std::size_t& at) {
  std::uint64_t size = 0;
  for (unsigned shift = 0; at < b.size() && shift < 64; shift += 7) {
    auto c = static_cast<unsigned char>(b[at++]);
    size |= std::uint64_t(c & 0x7f) << shift;
    if (!(c & 0x80)) return size;
  }
  return std::nullopt;
}

const char* type_name(int type) {
  switch (type) {
    case 1:
      return "commit";
    case 2:
      return "tree";
    case 3:
      return "blob";
    case 4:
      return "tag";
    default:
      return "delta";
  }
}

}  // namespace

struct PackScanner::Inflater {
  z_stream z{};
  bool open = false;
  Inflater() { open = inflateInit(&z) == Z_OK; }
  ~Inflater() {
    if (open) inflateEnd(&z);
  }
};

PackScanner::PackScanner(PackLimits limits)
    : limits_(limits), inflater_(std::make_unique<Inflater>()) {}

PackScanner::~PackScanner() = default;

Expected<void> PackScanner::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  return Error::bad_input(error_);
}

Expected<void> PackScanner::check_object_size(std::uint64_t size, std::string_view what) {
  largest_ = std::max(largest_, size);
  if (size > limits_.max_object_bytes)
    return fail(cat("object ", done_ + 1, " of the pack (", what, ") is ", size,
                    " bytes, over the limit of ", limits_.max_object_bytes, " bytes"));
  return {};
}

Expected<void> PackScanner::feed(std::string_view bytes) {
  if (!error_.empty()) return Error::bad_input(error_);
  bytes_ += bytes.size();
  if (bytes_ > limits_.max_pack_bytes)
    return fail(cat("the pack is larger than the limit of ", limits_.max_pack_bytes, " bytes"));
  while (!bytes.empty()) KILN_CHECK(step(bytes));
  return {};
}

Expected<void> PackScanner::finish() {
  if (!error_.empty()) return Error::bad_input(error_);
  if (state_ != State::Done)
    return fail(cat("the pack ends early (", done_, " of ", count_, " objects)"));
  return {};
}

Expected<void> PackScanner::step(std::string_view& in) {
  auto take = [&]() {
    auto c = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    return c;
  };
  switch (state_) {
    case State::Header: {
      std::size_t n = std::min(kHeaderBytes - header_.size(), in.size());
      header_.append(in.substr(0, n));
      in.remove_prefix(n);
      if (header_.size() < kHeaderBytes) return {};
      std::uint32_t version = be32(std::string_view(header_).substr(4));
      if (header_.compare(0, 4, "PACK") != 0 || (version != 2 && version != 3))
        return fail("not a git pack (no PACK header of version 2 or 3)");
      count_ = be32(std::string_view(header_).substr(8));
      if (count_ > limits_.max_objects)
        return fail(
            cat("the pack holds ", count_, " objects, over the limit of ", limits_.max_objects));
      state_ = count_ == 0 ? State::Trailer : State::EntryHeader;
      shift_ = 0;
      return {};
    }
    case State::EntryHeader:
      return entry_header(take());
    case State::OffsetBase:
      if (++base_bytes_ > kMaxOffsetBytes) return fail("a delta's base offset is too long");
      if (!(take() & 0x80)) state_ = State::Data;
      return {};
    case State::RefBase:
      take();
      if (++base_bytes_ == kRefBaseBytes) state_ = State::Data;
      return {};
    case State::Data:
      return data(in);
    case State::Trailer:
      take();
      if (++trailer_ == kTrailerBytes) state_ = State::Done;
      return {};
    case State::Done:
      return fail("bytes after the pack's end");
  }
  return {};
}

Expected<void> PackScanner::entry_header(unsigned char c) {
  if (shift_ == 0) {
    type_ = (c >> 4) & 7;
    size_ = c & 15;
    shift_ = 4;
  } else {
    if (shift_ > 57) return fail(cat("object ", done_ + 1, " of the pack has an overlong size"));
    size_ |= std::uint64_t(c & 0x7f) << shift_;
    shift_ += 7;
  }
  if (c & 0x80) return {};
  shift_ = 0;
  if (type_ == 0 || type_ == 5) return fail(cat("object ", done_ + 1, " has no valid type"));
  if (type_ < 5) KILN_CHECK(check_object_size(size_, type_name(type_)));
  // A delta's own data is bounded too (its instructions); the object it makes is checked below.
  if (size_ > limits_.max_object_bytes) KILN_CHECK(check_object_size(size_, "delta"));
  base_bytes_ = 0;
  inflated_ = 0;
  header_.clear();
  state_ = type_ == 6 ? State::OffsetBase : type_ == 7 ? State::RefBase : State::Data;
  if (inflateReset(&inflater_->z) != Z_OK) return fail("zlib cannot restart");
  return {};
}

Expected<void> PackScanner::data(std::string_view& in) {
  if (!inflater_->open) return fail("zlib is not available");
  z_stream& z = inflater_->z;
  unsigned char out[65536];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(std::min<std::size_t>(in.size(), 1u << 30));
  const uInt offered = z.avail_in;
  int rc = Z_OK;
  while (z.avail_in > 0 && rc != Z_STREAM_END) {
    z.next_out = out;
    z.avail_out = sizeof out;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
      return fail(cat("object ", done_ + 1, " of the pack does not inflate (zlib ", rc, ")"));
    std::size_t produced = sizeof out - z.avail_out;
    inflated_ += produced;
    if (inflated_ > size_)
      return fail(cat("object ", done_ + 1, " of the pack inflates past its stated size of ", size_,
                      " bytes"));
    if (type_ >= 6 && header_.size() < kDeltaHeadBytes)
      header_.append(reinterpret_cast<const char*>(out),
                     std::min(produced, kDeltaHeadBytes - header_.size()));
    if (rc == Z_BUF_ERROR && produced == 0) break;  // needs more input
  }
  in.remove_prefix(offered - z.avail_in);
  if (type_ >= 6) {
    std::size_t at = 0;
    auto base = delta_size(header_, at);
    auto result = base ? delta_size(header_, at) : std::nullopt;
    if (result) {
      KILN_CHECK(check_object_size(*result, "the object a delta makes"));
    } else if (header_.size() >= kDeltaHeadBytes || rc == Z_STREAM_END) {
      return fail(cat("object ", done_ + 1, " of the pack is a delta without its sizes"));
    }
  }
  if (rc != Z_STREAM_END) return {};
  if (inflated_ != size_)
    return fail(cat("object ", done_ + 1, " of the pack inflates to ", inflated_,
                    " bytes, not its stated ", size_));
  ++done_;
  state_ = done_ == count_ ? State::Trailer : State::EntryHeader;
  return {};
}

}  // namespace kiln::fetch
