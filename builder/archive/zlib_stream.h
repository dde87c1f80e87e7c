// A zlib stream that ends itself: once `live` (its init succeeded), the destructor calls `End`
// (inflateEnd or deflateEnd). For the zip reader and writer.
#pragma once

#include <zlib.h>

namespace kiln::archive {

template <int (*End)(z_streamp)>
struct ZlibStream {
  z_stream z{};
  bool live = false;
  ZlibStream() = default;
  ZlibStream(const ZlibStream&) = delete;
  ZlibStream& operator=(const ZlibStream&) = delete;
  ~ZlibStream() {
    if (live) End(&z);
  }
};

using Inflater = ZlibStream<inflateEnd>;
using Deflater = ZlibStream<deflateEnd>;

}  // namespace kiln::archive
