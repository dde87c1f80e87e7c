#include "archive/zip_reader.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

#include "archive/zip_writer.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/process.h"

namespace kiln::archive {
namespace {

void put16(std::string& out, std::uint32_t v) {
  out += static_cast<char>(v & 0xff);
  out += static_cast<char>((v >> 8) & 0xff);
}
void put32(std::string& out, std::uint32_t v) {
  put16(out, v & 0xffff);
  put16(out, v >> 16);
}
void put64(std::string& out, std::uint64_t v) {
  put32(out, static_cast<std::uint32_t>(v));
  put32(out, static_cast<std::uint32_t>(v >> 32));
}
void set32(std::string& b, std::size_t at, std::uint32_t v) {
  std::string x;
  put32(x, v);
  b.replace(at, 4, x);
}

std::string deflate_raw(std::string_view data) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(compressBound(static_cast<uLong>(data.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::uint32_t crc_of(std::string_view data) {
  return static_cast<std::uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())));
}

// A zip built byte by byte, so each test can make exactly one thing wrong.
struct Item {
  std::string name;
  std::string data;
  bool deflate = true;
  std::uint16_t flags = 0;
  std::uint16_t method = 0xffff;  // 0xffff: from `deflate`
  bool descriptor = false;        // sizes and CRC after the data (flag bit 3)
  // Overrides of what the local header says (the central directory keeps the truth).
  std::optional<std::string> local_name;
  std::optional<std::uint32_t> local_crc, local_size, local_csize;
  std::optional<std::uint16_t> local_flags, local_method;
  std::optional<std::uint32_t> descriptor_crc;
  std::optional<std::string> stored_override;  // replace the stored bytes (after computing CRC)
  std::string trailing;                        // bytes after the entry that nothing accounts for
};

struct Built {
  std::string bytes;
  std::vector<std::size_t> local_offsets;
};

Built build_zip(const std::vector<Item>& items, bool zip64_end = false,
                const std::string& comment = "") {
  Built out;
  std::string cd;
  for (const auto& it : items) {
    std::uint16_t method = it.method != 0xffff ? it.method : (it.deflate ? 8 : 0);
    std::string stored = method == 8 ? deflate_raw(it.data) : it.data;
    std::uint32_t crc = crc_of(it.data);
    if (it.stored_override) stored = *it.stored_override;
    std::uint16_t flags = it.flags | (it.descriptor ? 8 : 0);
    std::size_t offset = out.bytes.size();
    out.local_offsets.push_back(offset);
    std::string lh;
    put32(lh, 0x04034b50);
    put16(lh, 20);
    put16(lh, it.local_flags.value_or(flags));
    put16(lh, it.local_method.value_or(method));
    put16(lh, 0);
    put16(lh, 0x21);
    put32(lh, it.local_crc.value_or(it.descriptor ? 0 : crc));
    put32(lh,
          it.local_csize.value_or(it.descriptor ? 0 : static_cast<std::uint32_t>(stored.size())));
    put32(lh,
          it.local_size.value_or(it.descriptor ? 0 : static_cast<std::uint32_t>(it.data.size())));
    std::string lname = it.local_name.value_or(it.name);
    put16(lh, static_cast<std::uint32_t>(lname.size()));
    put16(lh, 0);
    lh += lname;
    out.bytes += lh + stored;
    if (it.descriptor) {
      put32(out.bytes, 0x08074b50);
      put32(out.bytes, it.descriptor_crc.value_or(crc));
      put32(out.bytes, static_cast<std::uint32_t>(stored.size()));
      put32(out.bytes, static_cast<std::uint32_t>(it.data.size()));
    }
    out.bytes += it.trailing;
    put32(cd, 0x02014b50);
    put16(cd, (3 << 8) | 20);
    put16(cd, 20);
    put16(cd, flags);
    put16(cd, method);
    put16(cd, 0);
    put16(cd, 0x21);
    put32(cd, crc);
    put32(cd, static_cast<std::uint32_t>(stored.size()));
    put32(cd, static_cast<std::uint32_t>(it.data.size()));
    put16(cd, static_cast<std::uint32_t>(it.name.size()));
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put16(cd, 0);
    put32(cd, 0100644u << 16);
    put32(cd, static_cast<std::uint32_t>(offset));
    cd += it.name;
  }
  std::size_t cd_offset = out.bytes.size();
  out.bytes += cd;
  if (zip64_end) {
    std::size_t end64 = out.bytes.size();
    put32(out.bytes, 0x06064b50);
    put64(out.bytes, 44);
    put16(out.bytes, (3 << 8) | 45);
    put16(out.bytes, 45);
    put32(out.bytes, 0);
    put32(out.bytes, 0);
    put64(out.bytes, items.size());
    put64(out.bytes, items.size());
    put64(out.bytes, cd.size());
    put64(out.bytes, cd_offset);
    put32(out.bytes, 0x07064b50);
    put32(out.bytes, 0);
    put64(out.bytes, end64);
    put32(out.bytes, 1);
  }
  put32(out.bytes, 0x06054b50);
  put16(out.bytes, 0);
  put16(out.bytes, 0);
  put16(out.bytes, zip64_end ? 0xffff : static_cast<std::uint32_t>(items.size()));
  put16(out.bytes, zip64_end ? 0xffff : static_cast<std::uint32_t>(items.size()));
  put32(out.bytes, zip64_end ? 0xffffffffu : static_cast<std::uint32_t>(cd.size()));
  put32(out.bytes, zip64_end ? 0xffffffffu : static_cast<std::uint32_t>(cd_offset));
  put16(out.bytes, static_cast<std::uint32_t>(comment.size()));
  out.bytes += comment;
  return out;
}

std::vector<Item> sample() {
  return {{"pkg/__init__.py", "print('hi')\n" + std::string(300, 'x')},
          {"pkg/data.bin", std::string("\x00\x01\x02stored", 9), false},
          {"pkg-1.0.dist-info/RECORD", "pkg/__init__.py,,\n"}};
}

// The error message of opening `bytes`, or "" when it opened.
std::string open_error(const std::string& bytes) {
  auto z = ZipReader::from_bytes(bytes, "t.whl");
  if (z) return "";
  EXPECT_EQ(z.error().kind, ErrorKind::BadInput) << z.error().message;
  return z.error().message;
}

TEST(ZipReader, ReadsWhatOurWriterWrites) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-zipr-").value();
  fs::path path = dir.path() / "x.whl";
  std::mt19937 rng(7);
  std::string big(3 * 1024 * 1024 + 17, '\0');
  for (std::size_t i = 0; i < big.size(); ++i)
    big[i] = (i / 8192) % 2 ? static_cast<char>(rng()) : static_cast<char>('a' + i % 5);
  {
    auto zip = ZipWriter::create(path).value();
    zip.add("pkg/__init__.py", "x = 1\n").value();
    zip.add("pkg/_C.so", big, /*executable=*/true).value();
    zip.add("pkg/empty", "").value();
    zip.add("pkg/d\xc3\xa9j\xc3\xa0.txt", "unicode\n").value();
    zip.finish().value();
  }
  auto z = ZipReader::open(path).value();
  ASSERT_EQ(z.entries().size(), 4u);
  EXPECT_EQ(z.entries()[0].name, "pkg/__init__.py");
  EXPECT_EQ(z.read(z.entries()[0]).value(), "x = 1\n");
  const ZipEntry* so = z.find("pkg/_C.so");
  ASSERT_NE(so, nullptr);
  EXPECT_EQ(so->method, 8);
  EXPECT_TRUE(so->is_executable());
  EXPECT_EQ(so->size, big.size());
  EXPECT_EQ(sha256_hex(z.read(*so).value()), sha256_hex(big));
  std::size_t chunks = 0, total = 0;
  z.read_chunks(*so, [&](std::string_view c) { ++chunks, total += c.size(); }).value();
  EXPECT_GT(chunks, 1u);
  EXPECT_EQ(total, big.size());
  EXPECT_EQ(z.find("pkg/empty")->method, 0);
  EXPECT_EQ(z.read(*z.find("pkg/empty")).value(), "");
  EXPECT_EQ(z.read(*z.find("pkg/d\xc3\xa9j\xc3\xa0.txt")).value(), "unicode\n");
  EXPECT_EQ(z.find("nope"), nullptr);
}

TEST(ZipReader, ReadsPythonZipfileOutput) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-zipr-").value();
  fs::path path = dir.path() / "py.whl";
  // Python writes directories, a comment, extra fields and (through a non-seekable stream) data
  // descriptors: all legal.
  std::string script = R"(
import io, sys, zipfile
class Stream(io.RawIOBase):
    def __init__(self, f): self.f = f
    def writable(self): return True
    def write(self, b): return self.f.write(b)
with open(sys.argv[1], 'wb') as f:
    with zipfile.ZipFile(Stream(f), 'w', zipfile.ZIP_DEFLATED) as z:
        z.writestr('pkg/', '')
        z.writestr('pkg/a.py', 'a = 1\n' * 100)
        z.writestr(zipfile.ZipInfo('pkg/s.txt'), 'stored')
        z.comment = b'made by python'
)";
  auto made = run_capture({"python3", "-c", script, path.string()});
  ASSERT_TRUE(made) << made.error().message << made.error().detail;
  auto z = ZipReader::open(path);
  ASSERT_TRUE(z) << z.error().message;
  ASSERT_EQ(z->entries().size(), 3u);
  EXPECT_TRUE(z->entries()[0].is_directory());
  EXPECT_TRUE(z->entries()[1].flags & 8) << "expected a data descriptor";
  EXPECT_EQ(z->read(*z->find("pkg/a.py")).value(), [] {
    std::string s;
    for (int i = 0; i < 100; ++i) s += "a = 1\n";
    return s;
  }());
  EXPECT_EQ(z->read(*z->find("pkg/s.txt")).value(), "stored");
}

TEST(ZipReader, HandBuiltSampleOpensWithDescriptorsAndZip64End) {
  EXPECT_EQ(open_error(build_zip(sample()).bytes), "");
  auto items = sample();
  items[0].descriptor = true;
  EXPECT_EQ(open_error(build_zip(items).bytes), "");
  auto z64 = ZipReader::from_bytes(build_zip(sample(), /*zip64_end=*/true).bytes, "z64.whl");
  ASSERT_TRUE(z64) << z64.error().message;
  EXPECT_EQ(z64->entries().size(), 3u);
  EXPECT_EQ(z64->read(*z64->find("pkg/data.bin")).value(), std::string("\x00\x01\x02stored", 9));
  EXPECT_EQ(open_error(build_zip(sample(), false, "a comment").bytes), "");
}

TEST(ZipReader, LocalHeadersMustAgreeWithTheCentralDirectory) {
  auto with = [](auto change) {
    auto items = sample();
    change(items[0]);
    return open_error(build_zip(items).bytes);
  };
  EXPECT_EQ(
      with([](Item& i) { i.local_crc = 0x12345678; }),
      "zip t.whl: entry 'pkg/__init__.py': local header CRC 12345678 disagrees with the central "
      "directory's " +
          [] {
            char buf[9];
            std::snprintf(buf, sizeof buf, "%08x", crc_of("print('hi')\n" + std::string(300, 'x')));
            return std::string(buf);
          }());
  EXPECT_NE(with([](Item& i) { i.local_size = 5; }).find("local header size 5 disagrees"),
            std::string::npos);
  EXPECT_NE(
      with([](Item& i) { i.local_csize = 5; }).find("local header compressed size 5 disagrees"),
      std::string::npos);
  EXPECT_NE(with([](Item& i) {
              i.local_name = "pkg/__init__.pz";
            }).find("local header names it 'pkg/__init__.pz'"),
            std::string::npos);
  EXPECT_NE(with([](Item& i) { i.local_flags = 0x800; }).find("local header flags 2048 disagree"),
            std::string::npos);
  EXPECT_NE(with([](Item& i) { i.local_method = 0; }).find("local header method 0 disagrees"),
            std::string::npos);
  EXPECT_NE(with([](Item& i) {
              i.descriptor = true;
              i.descriptor_crc = 1;
            }).find("data descriptor disagrees"),
            std::string::npos);
}

TEST(ZipReader, RejectsBadNamesAndDuplicates) {
  auto named = [](const std::string& name) {
    auto items = sample();
    items[1].name = name;
    return open_error(build_zip(items).bytes);
  };
  EXPECT_NE(named("../evil.py").find("entry '../evil.py' escapes the archive"), std::string::npos);
  EXPECT_NE(named("pkg/../../evil.py").find("escapes the archive"), std::string::npos);
  EXPECT_NE(named("/etc/passwd").find("is an absolute path"), std::string::npos);
  EXPECT_NE(named("pkg\\x.py").find("backslash"), std::string::npos);
  EXPECT_NE(named("pkg//x.py").find("empty path component"), std::string::npos);
  EXPECT_NE(named("pkg/./x.py").find("'.' component"), std::string::npos);
  EXPECT_NE(named(std::string("pkg/\xff.py")).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(named("pkg/__init__.py").find("entry 'pkg/__init__.py' is a duplicate"),
            std::string::npos);
  EXPECT_NE(named("pkg/__init__.py/x").find("lies inside 'pkg/__init__.py', which is a file"),
            std::string::npos);
  EXPECT_EQ(zip_name_problem("pkg/sub/"), "");
  EXPECT_EQ(zip_name_problem("a.dist-info/RECORD"), "");
}

TEST(ZipReader, RejectsTruncatedAppendedAndPrependedBytes) {
  std::string good = build_zip(sample()).bytes;
  for (std::size_t cut :
       {good.size() - 1, good.size() - 22, good.size() / 2, std::size_t(10), std::size_t(0)}) {
    SCOPED_TRACE(cut);
    std::string e = open_error(good.substr(0, cut));
    EXPECT_TRUE(e.find("no end-of-central-directory record (truncated") != std::string::npos ||
                e.find("too short to be a zip") != std::string::npos ||
                e.find("does not reach the end") != std::string::npos)
        << e;
  }
  EXPECT_NE(open_error(good + "junk").find("does not reach the end of the file"),
            std::string::npos);
  EXPECT_NE(open_error("XXXX" + good).find("is not where the end record says"), std::string::npos);
  EXPECT_NE(open_error("not a zip at all, just text").find("no end-of-central-directory record"),
            std::string::npos);
}

TEST(ZipReader, RejectsMisplacedEntriesAndGaps) {
  // A central entry pointing at another entry's local header.
  auto items = sample();
  Built b = build_zip(items);
  // Point entry 2's central offset at entry 1's local header: names then disagree.
  std::string bytes = b.bytes;
  std::size_t eocd = bytes.size() - 22;
  std::size_t cd = static_cast<unsigned char>(bytes[eocd + 16]) |
                   static_cast<unsigned char>(bytes[eocd + 17]) << 8;
  std::size_t second = cd + 46 + items[0].name.size();
  set32(bytes, second + 42, static_cast<std::uint32_t>(b.local_offsets[0]));
  EXPECT_NE(open_error(bytes).find("local header names it 'pkg/__init__.py'"), std::string::npos);
  // Beyond the entries.
  set32(bytes, second + 42, 0x7fffffff);
  EXPECT_NE(open_error(bytes).find("lies outside the entries"), std::string::npos);

  // Unaccounted bytes between entries (a place to hide content from tools that read one header).
  auto gap = sample();
  gap[1].trailing = "HIDDEN";
  std::string e = open_error(build_zip(gap).bytes);
  EXPECT_NE(e.find("6 bytes at offset"), std::string::npos) << e;
  EXPECT_NE(e.find("belong to no entry"), std::string::npos) << e;

  // Overlap: entry b's central record points at a copy of its local header hidden inside a's data
  // (both headers agree with the directory, so only the overlap gives it away).
  Built inner = build_zip({{"b.txt", "inner", false}});
  std::string b_local = inner.bytes.substr(0, 30 + 5 + 5);  // header, name, data
  Built outer = build_zip({{"a.bin", b_local, false}, {"b.txt", "inner", false}});
  std::string ov = outer.bytes;
  std::size_t oe = ov.size() - 22;
  std::size_t ocd =
      static_cast<unsigned char>(ov[oe + 16]) | static_cast<unsigned char>(ov[oe + 17]) << 8;
  set32(ov, ocd + 46 + 5 + 42, 35);  // b's central offset: a's data starts at 30 + len("a.bin")
  e = open_error(ov);
  EXPECT_NE(e.find("entries overlap at offset 35"), std::string::npos) << e;
}

TEST(ZipReader, RejectsEncryptionOtherMethodsAndBadData) {
  auto items = sample();
  items[0].flags = 1;
  EXPECT_NE(open_error(build_zip(items).bytes).find("is encrypted"), std::string::npos);
  items = sample();
  items[0].method = 12;  // bzip2
  items[0].deflate = false;
  EXPECT_NE(open_error(build_zip(items).bytes).find("compression method 12"), std::string::npos);

  // Headers agree but the data is damaged: opening succeeds, reading fails.
  items = sample();
  items[1].stored_override =
      std::string("\x00\x01\x03stored", 9);  // one bit flipped, CRC of the original
  auto z = ZipReader::from_bytes(build_zip(items).bytes, "t.whl").value();
  auto r = z.read(*z.find("pkg/data.bin"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("CRC"), std::string::npos) << r.error().message;

  items = sample();
  items[0].stored_override = std::string("\xff\xff\xff\xff garbage deflate");
  z = ZipReader::from_bytes(build_zip(items).bytes, "t.whl").value();
  r = z.read(*z.find("pkg/__init__.py"));
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("deflate data"), std::string::npos) << r.error().message;

  // A declared size over the caller's limit is refused before inflating, naming the limit.
  z = ZipReader::from_bytes(build_zip(sample()).bytes, "t.whl").value();
  r = z.read(*z.find("pkg/__init__.py"), 10);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("inflates past the limit of 10 bytes; the directory says"),
            std::string::npos)
      << r.error().message;
  r = z.read(*z.find("pkg/__init__.py"), 10, "10 bytes (the limit for tests)");
  EXPECT_NE(r.error().message.find("inflates past 10 bytes (the limit for tests)"),
            std::string::npos)
      << r.error().message;
}

TEST(ZipReader, SurvivesRandomDamage) {
  std::string good = build_zip(sample()).bytes;
  std::mt19937 rng(11);
  for (int round = 0; round < 3000; ++round) {
    std::string b = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    auto z = ZipReader::from_bytes(b, "fuzz.whl");
    if (!z) continue;
    for (const auto& e : z->entries())
      (void)z->read(e, 1 << 20);  // errors are fine; crashes are not
  }
  SUCCEED();
}

}  // namespace
}  // namespace kiln::archive
