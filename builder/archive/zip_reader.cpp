#include "archive/zip_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "archive/zlib_stream.h"
#include "core/bytes.h"
#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {

namespace fs = std::filesystem;

namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kEnd64Sig = 0x06064b50;
constexpr std::uint32_t kLocator64Sig = 0x07064b50;
constexpr std::uint32_t kDescriptorSig = 0x08074b50;
constexpr std::size_t kLocalSize = 30;
constexpr std::size_t kCentralSize = 46;
constexpr std::size_t kEndSize = 22;
constexpr std::size_t kLocator64Size = 20;
constexpr std::size_t kEnd64Size = 56;
constexpr std::uint16_t kFlagEncrypted = 1 << 0;
constexpr std::uint16_t kFlagDescriptor = 1 << 3;
constexpr std::uint16_t kFlagPatched = 1 << 5;
constexpr std::uint16_t kFlagStrongEncryption = 1 << 6;
constexpr std::uint16_t kFlagMaskedHeaders = 1 << 13;
constexpr std::uint32_t kMax32 = 0xffffffffu;
constexpr std::size_t kInflateChunk = 256 * 1024;

std::string hex32(std::uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

// The ZIP64 extended information extra field (0x0001) of a header, when present.
struct Zip64Fields {
  std::optional<std::uint64_t> size, compressed, offset;
};

// Walks an extra field block; false when it is malformed (a record runs past the block).
bool read_zip64_extra(std::string_view extra, bool want_size, bool want_compressed,
                      bool want_offset, Zip64Fields& out, bool& found) {
  found = false;
  std::size_t at = 0;
  while (at < extra.size()) {
    if (extra.size() - at < 4) return false;
    std::uint16_t id = read_le16(extra, at);
    std::uint16_t len = read_le16(extra, at + 2);
    if (extra.size() - at - 4 < len) return false;
    if (id == 0x0001) {
      found = true;
      std::size_t p = at + 4, end = at + 4 + len;
      auto take = [&](std::optional<std::uint64_t>& field) {
        if (end - p < 8) return false;
        field = read_le64(extra, p);
        p += 8;
        return true;
      };
      if (want_size && !take(out.size)) return false;
      if (want_compressed && !take(out.compressed)) return false;
      if (want_offset && !take(out.offset)) return false;
    }
    at += 4 + len;
  }
  return true;
}

}  // namespace

// --- MappedFile ---

Expected<MappedFile> MappedFile::open(const fs::path& path) {
  auto file = open_regular(path);
  if (!file) return file.error();
  if (file->size == 0) return MappedFile(nullptr, 0);
  auto size = static_cast<std::size_t>(file->size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file->fd.get(), 0);
  if (data == MAP_FAILED)
    return Error::failed(cat("cannot map ", path.string(), ": ", std::strerror(errno)));
  return MappedFile(data, size);
}

MappedFile::MappedFile(MappedFile&& other) noexcept : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

// --- names ---

std::string zip_name_problem(std::string_view name) {
  if (name.empty()) return "has an empty name";
  if (name.find('\0') != std::string_view::npos) return "has a NUL byte in its name";
  if (name.find('\\') != std::string_view::npos) return "has a backslash in its name";
  if (name.front() == '/') return "is an absolute path";
  if (name.size() >= 2 && name[1] == ':') return "has a drive letter";
  if (!is_valid_utf8(name)) return "is not valid UTF-8";
  // A line break in a name splits its RECORD row for installers (pip reads RECORD with
  // str.splitlines()), which then remove files the wheel never held.
  if (std::string c = control_character(name); !c.empty())
    return cat("has a control character (", c, ") in its name");
  std::string_view body = name.back() == '/' ? name.substr(0, name.size() - 1) : name;
  if (body.empty()) return "is an absolute path";
  for (const auto& part : split(body, "/", /*skip_empty=*/false)) {
    if (part.empty()) return "has an empty path component";
    if (part == "..") return "escapes the archive ('..' component)";
    if (part == ".") return "has a '.' component";
  }
  return "";
}

// --- ZipReader ---

struct ZipReader::Image {
  std::optional<MappedFile> mapped;
  std::string owned;
  std::string_view bytes() const { return mapped ? mapped->bytes() : std::string_view(owned); }
};

std::string_view ZipReader::image() const {
  return image_->bytes();
}

Expected<ZipReader> ZipReader::open(const fs::path& path, std::string name, bool check_names) {
  KILN_TRY(MappedFile mapped, MappedFile::open(path));
  auto image = std::make_shared<Image>();
  image->mapped.emplace(std::move(mapped));
  ZipReader reader(std::move(image), name.empty() ? path.filename().string() : std::move(name));
  KILN_CHECK(reader.parse(check_names));
  return reader;
}

Expected<ZipReader> ZipReader::from_bytes(std::string data, std::string name) {
  auto image = std::make_shared<Image>();
  image->owned = std::move(data);
  ZipReader reader(std::move(image), std::move(name));
  KILN_CHECK(reader.parse());
  return reader;
}

const ZipEntry* ZipReader::find(std::string_view name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

namespace {

// Errors that name the archive.
struct Bad {
  std::string_view zip;
  Error operator()(const std::string& what) const {
    return Error::bad_input(cat("zip ", zip, ": ", what));
  }
};

// Where the central directory is and how many entries it holds, from the end records.
struct Directory {
  std::uint64_t count = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t end = 0;  // where it must end: the (ZIP64) end record
};

// The end-of-central-directory record: the last one whose comment reaches exactly the end.
Expected<std::uint64_t> find_end_record(std::string_view b, const Bad& bad) {
  const std::uint64_t size = b.size();
  if (size < kEndSize) return bad(cat("too short to be a zip (", size, " bytes)"));
  std::optional<std::uint64_t> misplaced;  // a signature whose comment length does not fit
  std::uint64_t lowest = size > kEndSize + 0xffff ? size - kEndSize - 0xffff : 0;
  for (std::uint64_t at = size - kEndSize + 1; at-- > lowest;) {
    if (read_le32(b, at) != kEndSig) continue;
    if (at + kEndSize + read_le16(b, at + 20) == size) return at;
    if (!misplaced) misplaced = at;
  }
  if (misplaced)
    return bad(cat("the end-of-central-directory record at offset ", *misplaced,
                   " does not reach the end of the file (truncated, or bytes appended)"));
  return bad("no end-of-central-directory record (truncated, or not a zip file)");
}

// The ZIP64 end record the locator before `eocd` points at: the directory's real values.
Expected<void> read_zip64_end(std::string_view b, std::uint64_t eocd, Directory& d,
                              const Bad& bad) {
  if (eocd < kLocator64Size || read_le32(b, eocd - kLocator64Size) != kLocator64Sig)
    return bad("the end record needs ZIP64 values but there is no ZIP64 locator");
  std::uint64_t loc = eocd - kLocator64Size;
  if (read_le32(b, loc + 4) != 0 || read_le32(b, loc + 16) > 1)
    return bad("is a multi-disk archive, which wheels never are");
  std::uint64_t end64 = read_le64(b, loc + 8);
  if (end64 > loc || loc - end64 < kEnd64Size || read_le32(b, end64) != kEnd64Sig)
    return bad("the ZIP64 locator does not point at a ZIP64 end record");
  if (read_le64(b, end64 + 4) + 12 != loc - end64)
    return bad("the ZIP64 end record's size disagrees with its position");
  if (read_le32(b, end64 + 16) != 0 || read_le32(b, end64 + 20) != 0)
    return bad("is a multi-disk archive, which wheels never are");
  std::uint64_t count64 = read_le64(b, end64 + 32);
  if (read_le64(b, end64 + 24) != count64)
    return bad("the ZIP64 end record's entry counts disagree");
  if (d.count != 0xffff && d.count != count64)
    return bad("the end records disagree on the number of entries");
  d.count = count64;
  d.size = read_le64(b, end64 + 40);
  d.offset = read_le64(b, end64 + 48);
  d.end = end64;
  return {};
}

Expected<Directory> locate_directory(std::string_view b, const Bad& bad) {
  KILN_TRY(std::uint64_t eocd, find_end_record(b, bad));
  if (read_le16(b, eocd + 4) != 0 || read_le16(b, eocd + 6) != 0)
    return bad("is a multi-disk archive, which wheels never are");
  Directory d;
  d.count = read_le16(b, eocd + 10);
  if (read_le16(b, eocd + 8) != d.count) return bad("the end record's entry counts disagree");
  d.size = read_le32(b, eocd + 12);
  d.offset = read_le32(b, eocd + 16);
  d.end = eocd;
  bool zip64 = d.count == 0xffff || d.size == kMax32 || d.offset == kMax32;
  if (eocd >= kLocator64Size && read_le32(b, eocd - kLocator64Size) == kLocator64Sig) zip64 = true;
  if (zip64) KILN_CHECK(read_zip64_end(b, eocd, d, bad));
  if (d.offset > d.end || d.size != d.end - d.offset)
    return bad(cat("the central directory (offset ", d.offset, ", ", d.size,
                   " bytes) is not where the end record says (it must end at offset ", d.end, ")"));
  if (d.count > d.size / kCentralSize)
    return bad(
        cat("the end record claims ", d.count, " entries, more than the central directory holds"));
  return d;
}

// What a central directory entry says of itself, apart from its place among the others.
Expected<void> check_central_fields(ZipEntry& e, std::string_view extra, std::uint16_t disk,
                                    bool check_names, const Bad& bad) {
  auto entry_bad = [&](const std::string& what) {
    return bad(cat("entry '", printable_excerpt(e.name, 200), "' ", what));
  };
  if (check_names)
    if (std::string problem = zip_name_problem(e.name); !problem.empty()) return entry_bad(problem);
  Zip64Fields z64;
  bool found = false;
  if (!read_zip64_extra(extra, e.size == kMax32, e.compressed_size == kMax32,
                        e.local_offset == kMax32, z64, found))
    return entry_bad("has a malformed extra field");
  if (e.size == kMax32 || e.compressed_size == kMax32 || e.local_offset == kMax32) {
    if (!found) return entry_bad("needs a ZIP64 extra field but has none");
    if (z64.size) e.size = *z64.size;
    if (z64.compressed) e.compressed_size = *z64.compressed;
    if (z64.offset) e.local_offset = *z64.offset;
  }
  if (disk != 0 && disk != 0xffff) return bad("is a multi-disk archive, which wheels never are");
  if (e.flags & (kFlagEncrypted | kFlagStrongEncryption | kFlagMaskedHeaders))
    return entry_bad("is encrypted");
  if (e.flags & kFlagPatched)
    return entry_bad("uses compressed patched data, which kiln does not read");
  if (e.method != 0 && e.method != 8)
    return entry_bad(
        cat("uses compression method ", e.method, " (only stored and deflate are allowed)"));
  if (e.method == 0 && e.compressed_size != e.size)
    return entry_bad(
        cat("is stored but its sizes differ (", e.compressed_size, " != ", e.size, ")"));
  if (e.is_directory() && e.size != 0) return entry_bad("is a directory with content");
  return {};
}

// The central directory entry at `at` (the i-th of d.count); moves `at` past it.
Expected<ZipEntry> read_central_entry(std::string_view b, std::uint64_t& at, std::uint64_t i,
                                      const Directory& d, bool check_names, const Bad& bad) {
  if (d.end - at < kCentralSize || read_le32(b, at) != kCentralSig)
    return bad(
        cat("central directory entry ", i + 1, " of ", d.count, " is malformed (offset ", at, ")"));
  std::uint16_t made_by = read_le16(b, at + 4);
  ZipEntry e;
  e.flags = read_le16(b, at + 8);
  e.method = read_le16(b, at + 10);
  e.crc = read_le32(b, at + 16);
  e.compressed_size = read_le32(b, at + 20);
  e.size = read_le32(b, at + 24);
  std::uint16_t name_len = read_le16(b, at + 28), extra_len = read_le16(b, at + 30),
                comment_len = read_le16(b, at + 32);
  std::uint16_t disk = read_le16(b, at + 34);
  std::uint32_t external = read_le32(b, at + 38);
  e.local_offset = read_le32(b, at + 42);
  if (d.end - at - kCentralSize < std::uint64_t(name_len) + extra_len + comment_len)
    return bad(cat("central directory entry ", i + 1, " runs past the central directory"));
  e.name = std::string(b.substr(at + kCentralSize, name_len));
  std::string_view extra = b.substr(at + kCentralSize + name_len, extra_len);
  at += kCentralSize + name_len + extra_len + comment_len;
  KILN_CHECK(check_central_fields(e, extra, disk, check_names, bad));
  if ((made_by >> 8) == 3) e.mode = external >> 16;  // made on Unix: st_mode in the high half
  return e;
}

using NameSet = std::set<std::string, std::less<>>;

// A file may not also be a directory of another entry.
Expected<void> check_no_file_holds_entries(const NameSet& names, const Bad& bad) {
  for (const auto& n : names)
    for (std::size_t slash = n.find('/'); slash != std::string::npos;
         slash = n.find('/', slash + 1))
      if (names.count(std::string_view(n).substr(0, slash)))
        return bad(cat("entry '", n, "' lies inside '", n.substr(0, slash), "', which is a file"));
  return {};
}

// A data descriptor after an entry's data (at `stop`): crc, compressed, size (8-byte sizes for
// ZIP64 entries), optionally after a signature. Returns where it ends.
template <typename EntryBad>
Expected<std::uint64_t> check_descriptor(std::string_view b, const ZipEntry& e, std::uint64_t stop,
                                         bool local64, std::uint64_t cd_offset,
                                         const EntryBad& entry_bad) {
  std::uint64_t p = stop;
  if (cd_offset - p >= 4 && read_le32(b, p) == kDescriptorSig) p += 4;
  bool wide = local64 || e.size >= kMax32 || e.compressed_size >= kMax32;
  std::uint64_t need = wide ? 20 : 12;
  if (cd_offset - p < need) return entry_bad("data descriptor runs into the central directory");
  std::uint32_t dcrc = read_le32(b, p);
  std::uint64_t dcsize = wide ? read_le64(b, p + 4) : read_le32(b, p + 4);
  std::uint64_t dusize = wide ? read_le64(b, p + 12) : read_le32(b, p + 8);
  if (dcrc != e.crc || dcsize != e.compressed_size || dusize != e.size)
    return entry_bad("data descriptor disagrees with the central directory");
  return p + need;
}

using Span = std::pair<std::uint64_t, std::uint64_t>;  // [local header, end of entry)

// An entry's local header agrees with its central entry; sets e.data_offset. Returns the span
// the entry takes, its header to the end of its data (or data descriptor).
Expected<Span> check_local_header(std::string_view b, ZipEntry& e, std::uint64_t cd_offset,
                                  const Bad& bad) {
  auto entry_bad = [&](const std::string& what) {
    return bad(cat("entry '", printable_excerpt(e.name, 200), "': ", what));
  };
  std::uint64_t lo = e.local_offset;
  if (lo > cd_offset || cd_offset - lo < kLocalSize)
    return entry_bad(cat("local header offset ", lo, " lies outside the entries"));
  if (read_le32(b, lo) != kLocalSig) return entry_bad(cat("no local header at offset ", lo));
  std::uint16_t flags = read_le16(b, lo + 6), method = read_le16(b, lo + 8);
  std::uint32_t crc = read_le32(b, lo + 14);
  std::uint64_t csize = read_le32(b, lo + 18), usize = read_le32(b, lo + 22);
  std::uint16_t name_len = read_le16(b, lo + 26), extra_len = read_le16(b, lo + 28);
  if (cd_offset - lo - kLocalSize < std::uint64_t(name_len) + extra_len)
    return entry_bad("local header runs into the central directory");
  std::string_view local_name = b.substr(lo + kLocalSize, name_len);
  std::string_view extra = b.substr(lo + kLocalSize + name_len, extra_len);
  if (local_name != e.name)
    return entry_bad(cat("local header names it '", printable_excerpt(local_name, 200),
                         "'; the central directory disagrees"));
  if (flags != e.flags)
    return entry_bad(
        cat("local header flags ", flags, " disagree with the central directory's ", e.flags));
  if (method != e.method)
    return entry_bad(
        cat("local header method ", method, " disagrees with the central directory's ", e.method));
  Zip64Fields z64;
  bool local64 = false;
  if (!read_zip64_extra(extra, usize == kMax32, csize == kMax32, false, z64, local64))
    return entry_bad("local header has a malformed extra field");
  if (usize == kMax32 && z64.size) usize = *z64.size;
  if (csize == kMax32 && z64.compressed) csize = *z64.compressed;
  e.data_offset = lo + kLocalSize + name_len + extra_len;
  bool descriptor = e.flags & kFlagDescriptor;
  auto agree = [&](std::uint64_t local, std::uint64_t central, const char* what) -> Expected<void> {
    if (local == central || (descriptor && local == 0)) return {};
    if (std::string(what) == "CRC")
      return entry_bad(cat("local header CRC ", hex32(static_cast<std::uint32_t>(local)),
                           " disagrees with the central directory's ",
                           hex32(static_cast<std::uint32_t>(central))));
    return entry_bad(cat("local header ", what, " ", local,
                         " disagrees with the central directory's ", central));
  };
  KILN_CHECK(agree(crc, e.crc, "CRC"));
  KILN_CHECK(agree(csize, e.compressed_size, "compressed size"));
  KILN_CHECK(agree(usize, e.size, "size"));
  if (e.data_offset > cd_offset || cd_offset - e.data_offset < e.compressed_size)
    return entry_bad(cat("data (", e.compressed_size, " bytes at offset ", e.data_offset,
                         ") runs past the entries"));
  std::uint64_t stop = e.data_offset + e.compressed_size;
  if (descriptor) {
    KILN_TRY(stop, check_descriptor(b, e, stop, local64, cd_offset, entry_bad));
  }
  return Span{lo, stop};
}

// The entries tile the space before the central directory: no overlap, no gap.
Expected<void> check_tiling(std::vector<Span> spans, std::uint64_t cd_offset, const Bad& bad) {
  std::sort(spans.begin(), spans.end());
  std::uint64_t expected = 0;
  for (const auto& [lo, hi] : spans) {
    if (lo < expected) return bad(cat("entries overlap at offset ", lo));
    if (lo > expected)
      return bad(cat(lo - expected, " bytes at offset ", expected, " belong to no entry"));
    expected = hi;
  }
  if (expected != cd_offset)
    return bad(cat(cd_offset - expected, " bytes at offset ", expected, " belong to no entry"));
  return {};
}

}  // namespace

Expected<void> ZipReader::parse(bool check_names) {
  const std::string_view b = image();
  const Bad bad{name_};
  KILN_TRY(Directory d, locate_directory(b, bad));

  NameSet names, dirs;
  std::uint64_t at = d.offset;
  entries_.reserve(d.count);
  for (std::uint64_t i = 0; i < d.count; ++i) {
    KILN_TRY(ZipEntry e, read_central_entry(b, at, i, d, check_names, bad));
    std::string_view key = e.is_directory() ? std::string_view(e.name).substr(0, e.name.size() - 1)
                                            : std::string_view(e.name);
    if (names.count(key) || dirs.count(key))
      return bad(cat("entry '", printable_excerpt(e.name, 200), "' is a duplicate"));
    (e.is_directory() ? dirs : names).insert(std::string(key));
    entries_.push_back(std::move(e));
  }
  if (at != d.end)
    return bad(cat("the central directory has ", d.end - at, " bytes after its last entry"));
  // With names left to the caller, neither is this: a symlink entry with entries under it is the
  // unpacker's to refuse.
  if (check_names) KILN_CHECK(check_no_file_holds_entries(names, bad));

  std::vector<Span> spans;
  for (auto& e : entries_) {
    KILN_TRY(Span span, check_local_header(b, e, d.offset, bad));
    spans.push_back(span);
  }
  return check_tiling(std::move(spans), d.offset, bad);
}

Expected<void> ZipReader::read_chunks(const ZipEntry& e,
                                      const std::function<void(std::string_view)>& sink,
                                      std::uint64_t max_size, std::string_view limit) const {
  std::string_view b = image();
  auto bad = [&](const std::string& what) {
    return Error::bad_input(cat("zip ", name_, ": entry '", e.name, "': ", what));
  };
  const std::string past =
      cat("inflates past ", limit.empty() ? cat("the limit of ", max_size, " bytes") : limit);
  if (e.size > max_size) return bad(cat(past, "; the directory says ", e.size, " bytes"));
  if (e.data_offset > b.size() || b.size() - e.data_offset < e.compressed_size)
    return bad("data lies outside the file");
  std::string_view data = b.substr(e.data_offset, e.compressed_size);
  uLong crc = crc32(0, Z_NULL, 0);
  std::uint64_t produced = 0;
  if (e.method == 0) {
    for (std::size_t p = 0; p < data.size(); p += kInflateChunk) {
      std::string_view chunk = data.substr(p, kInflateChunk);
      crc =
          crc32(crc, reinterpret_cast<const Bytef*>(chunk.data()), static_cast<uInt>(chunk.size()));
      sink(chunk);
    }
    produced = data.size();
  } else {
    Inflater inf;
    if (inflateInit2(&inf.z, -MAX_WBITS) != Z_OK) return Error::failed("cannot initialise zlib");
    inf.live = true;
    std::string out(kInflateChunk, '\0');
    std::size_t fed = 0;
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
      if (inf.z.avail_in == 0 && fed < data.size()) {
        std::size_t n = std::min<std::size_t>(data.size() - fed, 1u << 30);
        inf.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + fed));
        inf.z.avail_in = static_cast<uInt>(n);
        fed += n;
      }
      inf.z.next_out = reinterpret_cast<Bytef*>(out.data());
      inf.z.avail_out = static_cast<uInt>(out.size());
      rc = inflate(&inf.z, Z_NO_FLUSH);
      std::size_t n = out.size() - inf.z.avail_out;
      if (rc != Z_OK && rc != Z_STREAM_END) {
        if (rc == Z_BUF_ERROR && inf.z.avail_in == 0 && fed == data.size())
          return bad("deflate data ends early");
        return bad(cat("deflate data is corrupt (", inf.z.msg ? inf.z.msg : "zlib error", ")"));
      }
      produced += n;
      if (produced > max_size) return bad(past);  // e.size is not larger: the directory lies
      if (produced > e.size)
        return bad(cat("inflates to more than the ", e.size, " bytes the directory says"));
      crc = crc32(crc, reinterpret_cast<const Bytef*>(out.data()), static_cast<uInt>(n));
      if (n) sink(std::string_view(out.data(), n));
    }
    if (inf.z.avail_in != 0 || fed != data.size())
      return bad("has bytes after the end of its deflate data");
  }
  if (produced != e.size)
    return bad(cat("holds ", produced, " bytes; the directory says ", e.size));
  if (crc != e.crc)
    return bad(cat("CRC ", hex32(static_cast<std::uint32_t>(crc)),
                   " of its data disagrees with the recorded ", hex32(e.crc)));
  return {};
}

Expected<std::string> ZipReader::read(const ZipEntry& e, std::uint64_t max_size,
                                      std::string_view limit) const {
  std::string out;
  if (e.size <= max_size)
    out.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(e.size, std::uint64_t(64) << 20)));
  KILN_CHECK(read_chunks(
      e, [&](std::string_view chunk) { out += chunk; }, max_size, limit));
  return out;
}

}  // namespace kiln::archive
