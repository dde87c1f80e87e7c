#include "archive/stream_check.h"
#include "archive/libarchive_reader.h"

#include <archive.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace {

constexpr std::size_t kBlock = 64 * 1024;

Error corrupt(std::string_view archive_name, std::string_view what) {
  return Error::bad_input(cat("archive ", archive_name, ": ", what));
}

// zlib checks each gzip member's CRC-32 and length; members may follow one another.
Expected<void> check_gzip(int fd, std::uint64_t max_bytes, std::string_view archive_name) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) return Error::failed("cannot initialise zlib");
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&z, inflateEnd);
  std::string in(kBlock, '\0'), out(kBlock, '\0');
  off_t offset = 0;
  bool in_member = true, eof = false;
  std::uint64_t produced = 0;
  for (;;) {
    if (z.avail_in == 0 && !eof) {
      ssize_t n = ::pread(fd, in.data(), in.size(), offset);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return Error::failed(cat("cannot read archive ", archive_name, ": ", std::strerror(errno)));
      eof = n == 0;
      offset += n;
      z.next_in = reinterpret_cast<Bytef*>(in.data());
      z.avail_in = static_cast<uInt>(n);
    }
    if (!in_member) {  // between members: another one, or zero padding to the end
      if (z.avail_in == 0) {
        if (eof) return {};
        continue;
      }
      if (z.next_in[0] == 0) {
        for (uInt i = 0; i < z.avail_in; ++i)
          if (z.next_in[i] != 0)
            return corrupt(archive_name, "data follows the end of its gzip stream");
        z.avail_in = 0;
        continue;
      }
      if (z.next_in[0] != 0x1f || (z.avail_in > 1 && z.next_in[1] != 0x8b))  // not another member
        return corrupt(archive_name, "data follows the end of its gzip stream");
      if (inflateReset(&z) != Z_OK) return Error::failed("cannot reset zlib");
      in_member = true;
    }
    if (z.avail_in == 0 && eof) return corrupt(archive_name, "its gzip stream is truncated");
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int r = inflate(&z, Z_NO_FLUSH);
    produced += out.size() - z.avail_out;
    if (produced > max_bytes)
      return corrupt(archive_name,
                     cat("its gzip stream decompresses to more than ", max_bytes, " bytes"));
    if (r == Z_STREAM_END)
      in_member = false;
    else if (r == Z_DATA_ERROR || r == Z_NEED_DICT)
      return corrupt(archive_name, cat("corrupt gzip data (", z.msg ? z.msg : "bad data", ")"));
    else if (r == Z_MEM_ERROR)
      return Error::failed("zlib ran out of memory");
  }
}

// libarchive's own xz, bzip2 and zstd filters check their streams once read to the end.
Expected<void> drain(int fd, int filter, std::uint64_t max_bytes, std::string_view archive_name) {
  ArchivePtr a(archive_read_new());
  if (!a) return Error::failed("cannot allocate a libarchive reader");
  int ok = archive_read_support_format_raw(a.get());
  if (filter == ARCHIVE_FILTER_XZ) ok |= archive_read_support_filter_xz(a.get());
  if (filter == ARCHIVE_FILTER_BZIP2) ok |= archive_read_support_filter_bzip2(a.get());
  if (filter == ARCHIVE_FILTER_ZSTD) ok |= archive_read_support_filter_zstd(a.get());
  if (ok != ARCHIVE_OK) return Error::failed("libarchive lacks a filter it had");
  int dup = ::dup(fd);
  if (dup < 0 || ::lseek(dup, 0, SEEK_SET) < 0) {
    if (dup >= 0) ::close(dup);
    return Error::failed(cat("cannot read archive ", archive_name, ": ", std::strerror(errno)));
  }
  UniqueFd closer(dup);
  struct archive_entry* entry = nullptr;
  if (archive_read_open_fd(a.get(), dup, kBlock) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK)
    return corrupt(archive_name, cat("cannot read its compressed stream again (",
                                     archive_error_string(a.get()), ")"));
  std::string buf(kBlock, '\0');
  std::uint64_t produced = 0;
  for (;;) {
    la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
    if (n == 0) return {};
    if (n < 0)
      return corrupt(
          archive_name,
          cat("corrupt compressed data (",
              printable_excerpt(archive_error_string(a.get()) ? archive_error_string(a.get()) : "",
                                120),
              ")"));
    produced += static_cast<std::uint64_t>(n);
    if (produced > max_bytes)
      return corrupt(archive_name,
                     cat("its compressed stream decompresses to more than ", max_bytes, " bytes"));
  }
}

}  // namespace

Expected<void> check_compressed_stream(int fd, int filter, std::uint64_t max_bytes,
                                       std::string_view archive_name) {
  if (filter == ARCHIVE_FILTER_GZIP) return check_gzip(fd, max_bytes, archive_name);
  if (filter == ARCHIVE_FILTER_XZ || filter == ARCHIVE_FILTER_BZIP2 ||
      filter == ARCHIVE_FILTER_ZSTD)
    return drain(fd, filter, max_bytes, archive_name);
  return {};
}

}  // namespace kiln::archive
