#include "archive/zip_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "archive/zip_reader.h"
#include "archive/zlib_stream.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace {

namespace fs = std::filesystem;

// Content is fed to zlib in slices of exactly this size (the last one shorter), so the deflate
// stream depends only on the bytes, never on how the caller or the file system chunked them.
constexpr std::size_t kFlushChunk = 1 << 20;
constexpr std::uint64_t kZip32Max = 0xffffffffu;
constexpr std::uint16_t kVersion = 20;                  // 2.0: deflate
constexpr std::uint16_t kMadeBy = (3 << 8) | kVersion;  // Unix
constexpr std::uint16_t kFlagUtf8 = 1 << 11;
constexpr std::uint16_t kStored = 0;
constexpr std::uint16_t kDeflated = 8;

void put16(std::string& out, std::uint32_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}

void put32(std::string& out, std::uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

std::string last_errno_text() {
  return std::strerror(errno);
}

}  // namespace

ZipWriter::ZipWriter(AtomicFile file, fs::path path)
    : file_(std::move(file)), path_(std::move(path)) {
  auto t = static_cast<std::time_t>(source_date_epoch());
  std::tm tm{};
  gmtime_r(&t, &tm);
  int year = tm.tm_year + 1900;
  if (year < 1980) {
    dos_date_ = (1 << 5) | 1;  // 1980-01-01 00:00:00
    dos_time_ = 0;
  } else if (year > 2107) {
    dos_date_ = static_cast<std::uint16_t>((127 << 9) | (12 << 5) | 31);  // 2107-12-31 23:59:58
    dos_time_ = static_cast<std::uint16_t>((23 << 11) | (59 << 5) | 29);
  } else {
    dos_date_ =
        static_cast<std::uint16_t>(((year - 1980) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
    dos_time_ = static_cast<std::uint16_t>((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
  }
}

Expected<ZipWriter> ZipWriter::create(const fs::path& path) {
  KILN_TRY(AtomicFile file, AtomicFile::create(path, 0644));
  return ZipWriter(std::move(file), path);
}

Error ZipWriter::fail(Error error) {
  broken_ = true;
  return error;
}

Expected<void> ZipWriter::write(std::string_view bytes) {
  pending_ += bytes;
  offset_ += bytes.size();
  return pending_.size() >= kFlushChunk ? flush() : Expected<void>();
}

Expected<void> ZipWriter::flush() {
  auto r = file_.write(pending_);
  if (!r) return fail(std::move(r).error());
  flushed_ += pending_.size();
  pending_.clear();
  return {};
}

Expected<void> ZipWriter::patch(std::uint64_t at, std::string_view bytes) {
  if (at >= flushed_) {
    pending_.replace(static_cast<std::size_t>(at - flushed_), bytes.size(), bytes);
    return {};
  }
  KILN_CHECK(flush());
  if (::pwrite(file_.fd(), bytes.data(), bytes.size(), static_cast<off_t>(at)) !=
      static_cast<ssize_t>(bytes.size()))
    return fail(Error::failed(cat("cannot write ", path_.string(), ": ", last_errno_text())));
  return {};
}

Expected<void> ZipWriter::check_name(std::string_view name) const {
  std::string zip = path_.filename().string();
  auto bad = [&](std::string_view what) {
    return Error::bad_input(
        cat("zip ", zip, ": entry '", printable_excerpt(name, 200), "' ", what));
  };
  if (name.empty()) return Error::bad_input(cat("zip ", zip, ": empty entry name"));
  if (name.size() > 0xffff) return bad("has a name longer than 65535 bytes");
  if (name.back() == '/') return bad("has an empty path component");
  if (std::string problem = zip_name_problem(name); !problem.empty()) return bad(problem);
  if (files_.count(name)) return bad("is a duplicate");
  if (dirs_.count(name)) return bad("is also a directory of an earlier entry");
  for (std::size_t slash = name.find('/'); slash != std::string_view::npos;
       slash = name.find('/', slash + 1))
    if (files_.count(name.substr(0, slash)))
      return bad(cat("is inside '", name.substr(0, slash), "', an earlier file entry"));
  return {};
}

Expected<void> ZipWriter::write_entry(std::string_view name, std::uint64_t size, bool executable,
                                      const Source& source) {
  std::string zip = path_.filename().string();
  if (finished_)
    return Error::failed(cat("zip ", zip, ": entry '", name, "' added after finish()"));
  if (broken_) return Error::failed(cat("zip ", zip, ": an earlier write failed"));
  KILN_CHECK(check_name(name));
  if (size > kZip32Max || offset_ > kZip32Max || entries_.size() >= 0xffff)
    return Error::failed(
        cat("zip ", zip, ": entry '", name,
            "' would need ZIP64 (over 4 GiB or 65535 entries), which kiln does not write"));

  Entry entry;
  entry.name = std::string(name);
  entry.flags = is_ascii(name) ? 0 : kFlagUtf8;
  entry.method = size == 0 ? kStored : kDeflated;
  entry.size = size;
  entry.offset = offset_;
  entry.mode = executable ? 0100755 : 0100644;

  // The CRC and compressed size are patched in once known: the local header ends up holding the
  // same values as the central directory, without a data descriptor.
  std::string header;
  put32(header, 0x04034b50);
  put16(header, kVersion);
  put16(header, entry.flags);
  put16(header, entry.method);
  put16(header, dos_time_);
  put16(header, dos_date_);
  put32(header, 0);  // crc, patched
  put32(header, 0);  // compressed size, patched
  put32(header, static_cast<std::uint32_t>(size));
  put16(header, static_cast<std::uint32_t>(name.size()));
  put16(header, 0);  // no extra field
  header += name;
  KILN_CHECK(write(header));

  uLong crc = crc32(0, Z_NULL, 0);
  std::uint64_t read = 0;
  std::uint64_t compressed = 0;
  Deflater d;
  std::string out;
  if (entry.method == kDeflated) {
    if (deflateInit2(&d.z, kZipDeflateLevel, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      return fail(Error::failed(cat("zip ", zip, ": cannot initialise zlib")));
    d.live = true;
    out.resize(256 * 1024);
  }
  auto pump = [&]() -> Expected<void> {
    do {
      d.z.next_out = reinterpret_cast<Bytef*>(out.data());
      d.z.avail_out = static_cast<uInt>(out.size());
      int rc = deflate(&d.z, Z_NO_FLUSH);
      if (rc == Z_STREAM_ERROR)
        return fail(Error::failed(cat("zip ", zip, ": zlib failed on '", name, "'")));
      std::size_t produced = out.size() - d.z.avail_out;
      KILN_CHECK(write(std::string_view(out.data(), produced)));
      compressed += produced;
    } while (d.z.avail_out == 0);
    return {};
  };
  for (;;) {
    auto chunk = source();
    if (!chunk) return fail(std::move(chunk).error());
    if (chunk->empty()) break;
    read += chunk->size();
    if (read > size) break;
    crc =
        crc32(crc, reinterpret_cast<const Bytef*>(chunk->data()), static_cast<uInt>(chunk->size()));
    if (entry.method == kStored) {
      KILN_CHECK(write(*chunk));
      compressed += chunk->size();
    } else {
      d.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk->data()));
      d.z.avail_in = static_cast<uInt>(chunk->size());
      KILN_CHECK(pump());
    }
  }
  if (read != size)
    return fail(Error::failed(cat("zip ", zip, ": entry '", name,
                                  "' changed size while being read (", size, " bytes expected)")));
  if (entry.method == kDeflated) {
    d.z.next_in = nullptr;
    d.z.avail_in = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      d.z.next_out = reinterpret_cast<Bytef*>(out.data());
      d.z.avail_out = static_cast<uInt>(out.size());
      rc = deflate(&d.z, Z_FINISH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        return fail(Error::failed(cat("zip ", zip, ": zlib failed on '", name, "'")));
      std::size_t produced = out.size() - d.z.avail_out;
      KILN_CHECK(write(std::string_view(out.data(), produced)));
      compressed += produced;
    }
  }
  if (compressed > kZip32Max)
    return fail(Error::failed(cat("zip ", zip, ": entry '", name, "' would need ZIP64")));
  entry.crc = static_cast<std::uint32_t>(crc);
  entry.compressed = compressed;

  std::string fields;
  put32(fields, entry.crc);
  put32(fields, static_cast<std::uint32_t>(compressed));
  KILN_CHECK(patch(entry.offset + 14, fields));

  files_.insert(entry.name);
  for (std::size_t slash = name.find('/'); slash != std::string_view::npos;
       slash = name.find('/', slash + 1))
    dirs_.insert(std::string(name.substr(0, slash)));
  entries_.push_back(std::move(entry));
  return {};
}

Expected<void> ZipWriter::add(std::string_view name, std::string_view data, bool executable) {
  std::size_t pos = 0;
  Source source = [&]() -> Expected<std::string_view> {
    std::string_view chunk = data.substr(pos, kFlushChunk);
    pos += chunk.size();
    return chunk;
  };
  return write_entry(name, data.size(), executable, source);
}

Expected<void> ZipWriter::add_file(std::string_view name, const fs::path& source_path,
                                   const std::function<void(std::string_view)>& on_chunk) {
  auto file = open_regular(source_path, O_NOFOLLOW);
  if (!file) return Error::failed(cat("cannot add to a zip: ", file.error().message));
  int fd = file->fd.get();
  std::string buffer(kFlushChunk, '\0');
  Source source = [&]() -> Expected<std::string_view> {
    std::size_t filled = 0;
    while (filled < buffer.size()) {
      ssize_t n = ::read(fd, buffer.data() + filled, buffer.size() - filled);
      if (n < 0) {
        if (errno == EINTR) continue;
        return Error::failed(cat("cannot read ", source_path.string(), ": ", last_errno_text()));
      }
      if (n == 0) break;
      filled += static_cast<std::size_t>(n);
    }
    if (on_chunk && filled > 0) on_chunk(std::string_view(buffer.data(), filled));
    return std::string_view(buffer.data(), filled);
  };
  return write_entry(name, file->size, file->executable, source);
}

Expected<void> ZipWriter::finish() {
  std::string zip = path_.filename().string();
  if (finished_) return Error::failed(cat("zip ", zip, ": finish() called twice"));
  if (broken_) return Error::failed(cat("zip ", zip, ": an earlier write failed"));
  std::uint64_t start = offset_;
  std::string cd;
  for (const Entry& e : entries_) {
    put32(cd, 0x02014b50);
    put16(cd, kMadeBy);
    put16(cd, kVersion);
    put16(cd, e.flags);
    put16(cd, e.method);
    put16(cd, dos_time_);
    put16(cd, dos_date_);
    put32(cd, e.crc);
    put32(cd, static_cast<std::uint32_t>(e.compressed));
    put32(cd, static_cast<std::uint32_t>(e.size));
    put16(cd, static_cast<std::uint32_t>(e.name.size()));
    put16(cd, 0);  // extra field length
    put16(cd, 0);  // comment length
    put16(cd, 0);  // disk number
    put16(cd, 0);  // internal attributes
    put32(cd, e.mode << 16);
    put32(cd, static_cast<std::uint32_t>(e.offset));
    cd += e.name;
  }
  std::uint64_t cd_size = cd.size();
  if (start > kZip32Max || cd_size > kZip32Max)
    return fail(Error::failed(cat("zip ", zip, ": the central directory would need ZIP64")));
  put32(cd, 0x06054b50);
  put16(cd, 0);  // this disk
  put16(cd, 0);  // disk of the central directory
  put16(cd, static_cast<std::uint32_t>(entries_.size()));
  put16(cd, static_cast<std::uint32_t>(entries_.size()));
  put32(cd, static_cast<std::uint32_t>(cd_size));
  put32(cd, static_cast<std::uint32_t>(start));
  put16(cd, 0);  // comment length
  KILN_CHECK(write(cd));
  KILN_CHECK(flush());
  auto committed = file_.commit();
  if (!committed) return fail(std::move(committed).error());
  finished_ = true;
  return {};
}

}  // namespace kiln::archive
