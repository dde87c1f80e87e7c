#include "archive/zip_writer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/hash.h"
#include "core/process.h"

namespace kiln::archive {
namespace {

// SOURCE_DATE_EPOCH for one test, restored afterwards.
class EpochScope {
 public:
  explicit EpochScope(const char* value) {
    const char* old = std::getenv("SOURCE_DATE_EPOCH");
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv("SOURCE_DATE_EPOCH", value, 1);
  }
  ~EpochScope() {
    if (had_)
      ::setenv("SOURCE_DATE_EPOCH", old_.c_str(), 1);
    else
      ::unsetenv("SOURCE_DATE_EPOCH");
  }

 private:
  bool had_ = false;
  std::string old_;
};

std::string noise(std::size_t size, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(size, '\0');
  // Half random, half repetitive: both deflate paths (literals and matches) get exercised.
  for (std::size_t i = 0; i < size; ++i)
    s[i] = (i / 4096) % 2 ? static_cast<char>(rng()) : static_cast<char>('a' + i % 7);
  return s;
}

class Zip : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::make_unique<TempDir>(TempDir::create(fs::temp_directory_path(), "kiln-zip-").value());
    static const std::string big = noise(3 * 1024 * 1024 + 123, 1);  // several 1 MiB chunks
    big_ = big;
    std::ofstream(dir_->path() / "big.so", std::ios::binary) << big_;
    fs::permissions(dir_->path() / "big.so", fs::perms(0755));
    std::ofstream(dir_->path() / "plain.py") << "x = 1\n";
    fs::permissions(dir_->path() / "plain.py", fs::perms(0600));
  }

  // The wheel-like archive every test reads back.
  void write_sample(const fs::path& path) {
    auto zip = ZipWriter::create(path).value();
    zip.add("pkg/__init__.py", "from .core import *\n").value();
    zip.add_file("pkg/_C.so", dir_->path() / "big.so").value();
    zip.add("pkg/empty.txt", "").value();
    zip.add("pkg/tool.sh", "#!/bin/sh\necho hi\n", /*executable=*/true).value();
    zip.add_file("pkg/plain.py", dir_->path() / "plain.py").value();
    zip.add("pkg/d\xc3\xa9j\xc3\xa0.txt", "unicode name\n").value();
    zip.add("pkg-1.0.dist-info/RECORD", "pkg/__init__.py,,\n").value();
    zip.finish().value();
  }

  std::unique_ptr<TempDir> dir_;
  std::string big_;
};

TEST_F(Zip, SameInputsGiveSameBytesAtDifferentTimes) {
  EpochScope epoch("1700000000");
  fs::path a = dir_->path() / "a" / "x.whl";
  fs::path b = dir_->path() / "b" / "x.whl";
  write_sample(a);
  // Another second on the wall clock, and new mtimes on the source files.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  fs::last_write_time(dir_->path() / "big.so", fs::file_time_type::clock::now());
  fs::last_write_time(dir_->path() / "plain.py",
                      fs::file_time_type::clock::now() - std::chrono::hours(1000));
  write_sample(b);
  EXPECT_EQ(sha256_file(a).value(), sha256_file(b).value());
  // add() and add_file() of the same bytes give the same entry.
  fs::path c = dir_->path() / "c.zip";
  fs::path d = dir_->path() / "d.zip";
  {
    auto zip = ZipWriter::create(c).value();
    zip.add("f", big_, true).value();
    zip.finish().value();
  }
  {
    auto zip = ZipWriter::create(d).value();
    zip.add_file("f", dir_->path() / "big.so").value();
    zip.finish().value();
  }
  EXPECT_EQ(sha256_file(c).value(), sha256_file(d).value());
}

TEST_F(Zip, EpochChangesTheBytes) {
  fs::path a = dir_->path() / "a.zip";
  fs::path b = dir_->path() / "b.zip";
  {
    EpochScope epoch("1700000000");
    write_sample(a);
  }
  {
    EpochScope epoch("1700000002");
    write_sample(b);
  }
  std::string x = read_file(a).value(), y = read_file(b).value();
  ASSERT_EQ(x.size(), y.size());
  EXPECT_NE(x, y);
}

TEST_F(Zip, PythonReadsContentModesAndDates) {
  EpochScope epoch("1700000001");  // 2023-11-14 22:13:21 UTC: DOS time keeps even seconds
  fs::path path = dir_->path() / "pkg-1.0-py3-none-any.whl";
  write_sample(path);
  std::string script = R"(
import sys, zipfile, json, hashlib
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None
assert z.comment == b''
out = []
for i in z.infolist():
    out.append({'name': i.filename, 'mode': i.external_attr >> 16, 'date': list(i.date_time),
                'system': i.create_system, 'version': i.create_version, 'flags': i.flag_bits,
                'method': i.compress_type, 'extra': len(i.extra), 'comment': len(i.comment),
                'sha256': hashlib.sha256(z.read(i)).hexdigest()})
print(json.dumps(out))
)";
  auto text = run_capture({"python3", "-c", script, path.string()});
  ASSERT_TRUE(text) << text.error().message << text.error().detail;
  auto entries = nlohmann::json::parse(*text);
  struct Want {
    std::string name;
    int mode;
    std::string data;
    int method;
  };
  std::vector<Want> want = {
      {"pkg/__init__.py", 0100644, "from .core import *\n", 8},
      {"pkg/_C.so", 0100755, big_, 8},
      {"pkg/empty.txt", 0100644, "", 0},
      {"pkg/tool.sh", 0100755, "#!/bin/sh\necho hi\n", 8},
      {"pkg/plain.py", 0100644, "x = 1\n", 8},
      {"pkg/d\xc3\xa9j\xc3\xa0.txt", 0100644, "unicode name\n", 8},
      {"pkg-1.0.dist-info/RECORD", 0100644, "pkg/__init__.py,,\n", 8},
  };
  ASSERT_EQ(entries.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    const auto& e = entries[i];
    EXPECT_EQ(e["name"], want[i].name);  // in the order added
    EXPECT_EQ(e["mode"], want[i].mode);
    EXPECT_EQ(e["date"], nlohmann::json::array({2023, 11, 14, 22, 13, 20}));
    EXPECT_EQ(e["system"], 3);
    EXPECT_EQ(e["version"], 20);
    EXPECT_EQ(e["flags"], i == 5 ? 0x800 : 0);  // UTF-8 name flag only for the non-ASCII name
    EXPECT_EQ(e["method"], want[i].method);
    EXPECT_EQ(e["extra"], 0);
    EXPECT_EQ(e["comment"], 0);
    EXPECT_EQ(e["sha256"], sha256_hex(want[i].data));
  }
}

TEST_F(Zip, UnzipTestPasses) {
  if (find_program("unzip").empty()) GTEST_SKIP() << "unzip is not installed";
  fs::path path = dir_->path() / "t.zip";
  write_sample(path);
  auto out = run_capture({"unzip", "-t", path.string()});
  ASSERT_TRUE(out) << out.error().message << out.error().detail;
  EXPECT_NE(out->find("No errors detected"), std::string::npos) << *out;
}

std::uint32_t le16(const std::string& b, std::size_t at) {
  return static_cast<unsigned char>(b.at(at)) | static_cast<unsigned char>(b.at(at + 1)) << 8;
}
std::uint32_t le32(const std::string& b, std::size_t at) {
  return le16(b, at) | le16(b, at + 2) << 16;
}

TEST_F(Zip, LocalHeadersEqualTheCentralDirectory) {
  EpochScope epoch("1700000000");
  fs::path path = dir_->path() / "h.zip";
  write_sample(path);
  std::string b = read_file(path).value();
  ASSERT_GE(b.size(), 22u);
  std::size_t eocd = b.size() - 22;  // no comment: the end record is the last 22 bytes
  ASSERT_EQ(le32(b, eocd), 0x06054b50u);
  std::size_t count = le16(b, eocd + 10);
  std::size_t cd_size = le32(b, eocd + 12);
  std::size_t cd = le32(b, eocd + 16);
  EXPECT_EQ(count, 7u);
  EXPECT_EQ(le16(b, eocd + 8), count);
  EXPECT_EQ(cd + cd_size, eocd);
  std::size_t expect_local = 0;  // entries tile the file: each starts where the previous ended
  std::size_t p = cd;
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(le32(b, p), 0x02014b50u);
    std::size_t name_len = le16(b, p + 28);
    std::string name = b.substr(p + 46, name_len);
    SCOPED_TRACE(name);
    EXPECT_EQ(le16(b, p + 4), (3u << 8) | 20u);  // made by Unix, 2.0
    EXPECT_EQ(le16(b, p + 30), 0u);              // extra
    EXPECT_EQ(le16(b, p + 32), 0u);              // comment
    EXPECT_EQ(le16(b, p + 34), 0u);              // disk
    EXPECT_EQ(le16(b, p + 36), 0u);              // internal attributes
    std::uint32_t mode = le32(b, p + 38) >> 16;
    EXPECT_TRUE(mode == 0100644 || mode == 0100755) << std::oct << mode;
    std::size_t local = le32(b, p + 42);
    EXPECT_EQ(local, expect_local);
    ASSERT_EQ(le32(b, local), 0x04034b50u);
    EXPECT_EQ(le16(b, local + 4), le16(b, p + 6));    // version needed
    EXPECT_EQ(le16(b, local + 6), le16(b, p + 8));    // flags
    EXPECT_EQ(le16(b, local + 6) & 0x8, 0u);          // no data descriptor
    EXPECT_EQ(le16(b, local + 8), le16(b, p + 10));   // method
    EXPECT_EQ(le16(b, local + 10), le16(b, p + 12));  // time
    EXPECT_EQ(le16(b, local + 12), le16(b, p + 14));  // date
    EXPECT_EQ(le32(b, local + 14), le32(b, p + 16));  // crc
    EXPECT_EQ(le32(b, local + 18), le32(b, p + 20));  // compressed size
    EXPECT_EQ(le32(b, local + 22), le32(b, p + 24));  // size
    EXPECT_EQ(le16(b, local + 26), name_len);
    EXPECT_EQ(le16(b, local + 28), 0u);  // no extra field
    EXPECT_EQ(b.substr(local + 30, name_len), name);
    // 2023-11-14 22:13:20 as DOS date and time
    EXPECT_EQ(le16(b, p + 12), (22u << 11) | (13u << 5) | 10u);
    EXPECT_EQ(le16(b, p + 14), ((2023u - 1980u) << 9) | (11u << 5) | 14u);
    expect_local = local + 30 + name_len + le32(b, p + 20);
    p += 46 + name_len;
  }
  EXPECT_EQ(expect_local, cd);
  EXPECT_EQ(p, eocd);
}

TEST_F(Zip, RejectsBadNames) {
  fs::path path = dir_->path() / "names.zip";
  auto zip = ZipWriter::create(path).value();
  zip.add("a/b.py", "x").value();
  struct Case {
    std::string name;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"a/b.py", "is a duplicate"},
      {"/etc/passwd", "is an absolute path"},
      {"../evil", "'..' component"},
      {"a/../b", "'..' component"},
      {"./a", "has a '.' component"},
      {"a\\b", "has a backslash"},
      {"a//b", "has an empty path component"},
      {"dir/", "has an empty path component"},
      {"", "empty entry name"},
      {"a", "is also a directory of an earlier entry"},
      {"a/b.py/c", "is inside 'a/b.py', an earlier file entry"},
      {std::string("bad\xff.txt"), "is not valid UTF-8"},
      {std::string("nul\0x", 5), "NUL byte"},
      // Line breaks (for Python's splitlines) and other control characters: RECORD rows break
      // there.
      {"a\rb.py", "has a control character (\\x0d) in its name"},
      {"a\x0b.py", "has a control character (\\x0b)"},
      {"a\x1e.py", "has a control character (\\x1e)"},
      {"a\xc2\x85.py", "has a control character (U+0085)"},
      {"a\xe2\x80\xa8.py", "has a control character (U+2028)"},
      {"a\xe2\x80\xa9.py", "has a control character (U+2029)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    auto r = zip.add(c.name, "data");
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    EXPECT_NE(r.error().message.find(c.needle), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("names.zip"), std::string::npos) << r.error().message;
  }
  // A refused name leaves the writer usable and the archive valid.
  zip.add("a/c.py", "y").value();
  zip.finish().value();
  auto out = run_capture({"python3", "-c",
                          "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).namelist())",
                          path.string()});
  ASSERT_TRUE(out);
  EXPECT_EQ(*out, "['a/b.py', 'a/c.py']\n");
}

TEST_F(Zip, NothingAppearsWithoutFinish) {
  fs::path path = dir_->path() / "out" / "never.whl";
  {
    auto zip = ZipWriter::create(path).value();
    zip.add("a", "data").value();
  }
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(path.parent_path()));  // no temporary file left either
}

TEST_F(Zip, FinishTwiceAndAddAfterFinishFail) {
  fs::path path = dir_->path() / "f.zip";
  auto zip = ZipWriter::create(path).value();
  zip.add("a", "data").value();
  zip.finish().value();
  EXPECT_FALSE(zip.finish());
  EXPECT_FALSE(zip.add("b", "data"));
  EXPECT_TRUE(fs::exists(path));
}

TEST_F(Zip, RefusesMoreEntriesThanZip32Holds) {
  fs::path path = dir_->path() / "many.zip";
  auto zip = ZipWriter::create(path).value();
  for (int i = 0; i < 0xffff; ++i) zip.add(std::to_string(i), "").value();
  auto r = zip.add("one-too-many", "");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("ZIP64"), std::string::npos) << r.error().message;
  zip.finish().value();
  std::string b = read_file(path).value();
  ASSERT_GE(b.size(), 22u);
  EXPECT_EQ(le32(b, b.size() - 22), 0x06054b50u);
  EXPECT_EQ(le16(b, b.size() - 22 + 10), 0xffffu);  // entries in the end record
}

}  // namespace
}  // namespace kiln::archive
