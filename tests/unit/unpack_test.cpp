#include "archive/unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <fstream>
#include <random>
#include <set>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::archive {
namespace {

constexpr std::int64_t kTime = 1700000000;

struct TarMember {
  std::string name;
  char type = 'f';  // f file, d dir, l symlink, h hardlink, c char device, b block device, p FIFO
  std::string data;
  unsigned mode = 0644;
  std::string link;  // symlink or hardlink target
};

// Writes an archive with libarchive's writer (it writes hostile names and types as given).
void write_archive(const fs::path& path, const std::vector<TarMember>& members,
                   const std::vector<std::string>& filters = {},
                   const std::string& format = "paxr") {
  struct archive* a = archive_write_new();
  ASSERT_EQ(archive_write_set_format_by_name(a, format.c_str()), ARCHIVE_OK);
  for (const auto& f : filters) {
    ASSERT_EQ(archive_write_add_filter_by_name(a, f.c_str()), ARCHIVE_OK)
        << archive_error_string(a);
  }
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK) << archive_error_string(a);
  for (const auto& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_mtime(e, 1234567890, 0);
    archive_entry_set_perm(e, m.mode);
    archive_entry_set_size(e, 0);
    switch (m.type) {
      case 'd':
        archive_entry_set_filetype(e, AE_IFDIR);
        break;
      case 'l':
        archive_entry_set_filetype(e, AE_IFLNK);
        archive_entry_set_symlink(e, m.link.c_str());
        break;
      case 'h':
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_hardlink(e, m.link.c_str());
        break;
      case 'c':
        archive_entry_set_filetype(e, AE_IFCHR);
        archive_entry_set_rdev(e, makedev(1, 3));
        break;
      case 'b':
        archive_entry_set_filetype(e, AE_IFBLK);
        archive_entry_set_rdev(e, makedev(8, 0));
        break;
      case 'p':
        archive_entry_set_filetype(e, AE_IFIFO);
        break;
      default:
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    ASSERT_GE(archive_write_header(a, e), ARCHIVE_WARN)
        << m.name << ": " << archive_error_string(a);
    if (!m.data.empty()) {
      ASSERT_EQ(archive_write_data(a, m.data.data(), m.data.size()),
                static_cast<la_ssize_t>(m.data.size()));
    }
    archive_entry_free(e);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

// Runs a Python snippet with the output path as sys.argv[1] (zipfile writes what it is told).
void python(const std::string& script, const fs::path& out) {
  auto r = run_capture(
      {"python3", "-c", "import sys, zipfile, struct\nout = sys.argv[1]\n" + script, out.string()});
  ASSERT_TRUE(r) << r.error().message << "\n" << r.error().detail;
}

// Every path under `dir`, recursively, with its type: what must not change when an unpack fails.
std::set<std::string> listing(const fs::path& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator();
       ++it)
    out.insert(fs::relative(it->path(), dir).string() + (it->is_symlink()     ? "@"
                                                         : it->is_directory() ? "/"
                                                                              : ""));
  return out;
}

unsigned mode_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

std::int64_t mtime_of(const fs::path& p) {
  struct stat st;
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mtim.tv_sec;
}

class Unpack : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-unpack-").value());
    parent_ = base_->path() / "parent";
    fs::create_directories(parent_);
    std::ofstream(parent_ / "already-here.txt") << "keep";
    fs::create_directories(base_->path() / "outside");
    dest_ = parent_ / "out";
  }
  fs::path file(const std::string& name) const { return base_->path() / name; }

  // The unpack fails with BadInput naming the archive and `needle`; dest does not exist, the
  // parent holds what it held, and nothing landed outside.
  void expect_rejected(const fs::path& archive, const std::string& needle,
                       const UnpackOptions& options = {}) {
    auto before = listing(parent_);
    auto r = unpack(archive, dest_, options);
    ASSERT_FALSE(r) << "unpacked " << archive.filename();
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput) << r.error().message;
    EXPECT_NE(r.error().message.find(archive.filename().string()), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find(needle), std::string::npos) << r.error().message;
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
    EXPECT_FALSE(fs::exists(fs::symlink_status(dest_)));
    EXPECT_EQ(listing(parent_), before);
    EXPECT_TRUE(fs::is_empty(base_->path() / "outside"));
  }

  std::unique_ptr<TempDir> base_;
  fs::path parent_;
  fs::path dest_;
};

// ---- good archives ----

std::vector<TarMember> good_members() {
  return {
      {"pkg-1.0/", 'd', "", 0700},
      {"pkg-1.0/setup.py", 'f', "print('hi')\n", 0600},
      {"pkg-1.0/bin/run", 'f', "#!/bin/sh\necho run\n", 0700},
      {"pkg-1.0/link", 'l', "", 0777, "setup.py"},
      {"pkg-1.0/h\xc3\xa9llo.txt", 'f', "h\xc3\xa9llo\n", 0644},
      {"./pkg-1.0/./empty", 'f', "", 0664},
      {"top.txt", 'f', "top\n", 0444},
  };
}

void check_good_tree(const fs::path& dest, const UnpackResult& r) {
  EXPECT_EQ(read_file(dest / "pkg-1.0/setup.py").value(), "print('hi')\n");
  EXPECT_EQ(read_file(dest / "pkg-1.0/bin/run").value(), "#!/bin/sh\necho run\n");
  EXPECT_EQ(read_file(dest / "pkg-1.0/h\xc3\xa9llo.txt").value(), "h\xc3\xa9llo\n");
  EXPECT_EQ(read_file(dest / "pkg-1.0/empty").value(), "");
  EXPECT_EQ(read_file(dest / "top.txt").value(), "top\n");
  ASSERT_TRUE(fs::is_symlink(dest / "pkg-1.0/link"));
  EXPECT_EQ(fs::read_symlink(dest / "pkg-1.0/link"), "setup.py");
  EXPECT_EQ(mode_of(dest), 0755u);
  EXPECT_EQ(mode_of(dest / "pkg-1.0"), 0755u);
  EXPECT_EQ(mode_of(dest / "pkg-1.0/bin"), 0755u);
  EXPECT_EQ(mode_of(dest / "pkg-1.0/setup.py"), 0644u);
  EXPECT_EQ(mode_of(dest / "pkg-1.0/bin/run"), 0755u);
  EXPECT_EQ(mode_of(dest / "top.txt"), 0644u);
  for (auto it = fs::recursive_directory_iterator(dest); it != fs::recursive_directory_iterator();
       ++it)
    EXPECT_EQ(mtime_of(it->path()), kTime) << it->path();
  EXPECT_EQ(mtime_of(dest), kTime);
  EXPECT_EQ(r.top_level, (std::vector<std::string>{"pkg-1.0", "top.txt"}));
  EXPECT_EQ(r.entries, 7u);
  EXPECT_EQ(r.bytes, 12u + 19u + 7u + 4u);
}

TEST_F(Unpack, TarOfEachCompression) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> kinds = {
      {"src.tar", {}},
      {"src.tar.gz", {"gzip"}},
      {"src.tar.bz2", {"bzip2"}},
      {"src.tar.xz", {"xz"}},
      {"src.tar.zst", {"zstd"}}};
  for (const auto& [name, filters] : kinds) {
    SCOPED_TRACE(name);
    write_archive(file(name), good_members(), filters);
    fs::path dest = parent_ / (name + ".d");
    UnpackOptions options;
    options.mtime = kTime;
    auto r = unpack(file(name), dest, options);
    ASSERT_TRUE(r) << r.error().message;
    check_good_tree(dest, *r);
  }
  // Only the destinations appeared beside what was there: no temporary directory is left.
  EXPECT_EQ(listing(parent_).count("already-here.txt"), 1u);
  int top = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(parent_)) ++top;
  EXPECT_EQ(top, 6);
}

TEST_F(Unpack, ZipFromPython) {
  python(R"(
z = zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED)
def add(name, data=b'', mode=0o100644):
    i = zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0))
    i.external_attr = mode << 16
    i.create_system = 3
    i.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(i, data)
add('pkg-1.0/', mode=0o40700)
add('pkg-1.0/setup.py', b"print('hi')\n", 0o100600)
add('pkg-1.0/bin/run', b'#!/bin/sh\necho run\n', 0o100700)
add('pkg-1.0/link', b'setup.py', 0o120777)
add('pkg-1.0/h\u00e9llo.txt', 'h\u00e9llo\n'.encode())
add('pkg-1.0/empty', b'', 0o100664)
add('top.txt', b'top\n', 0o100444)
z.close()
)",
         file("src.zip"));
  UnpackOptions options;
  options.mtime = kTime;
  auto r = unpack(file("src.zip"), dest_, options);
  ASSERT_TRUE(r) << r.error().message;
  check_good_tree(dest_, *r);
}

TEST_F(Unpack, HardlinkInsideTheTreeSharesTheFile) {
  write_archive(file("h.tar.gz"), {{"a/f", 'f', "data", 0755}, {"b/g", 'h', "", 0755, "a/f"}},
                {"gzip"});
  auto r = unpack(file("h.tar.gz"), dest_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read_file(dest_ / "b/g").value(), "data");
  EXPECT_TRUE(fs::equivalent(dest_ / "a/f", dest_ / "b/g"));
  EXPECT_EQ(mode_of(dest_ / "b/g"), 0755u);
  EXPECT_EQ(mtime_of(dest_ / "b/g"), source_date_epoch());
}

TEST_F(Unpack, DuplicateFileReplacesTheEarlierOne) {
  write_archive(file("dup.tar"), {{"d/x", 'f', "first"}, {"d/", 'd'}, {"d/x", 'f', "second"}});
  auto r = unpack(file("dup.tar"), dest_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(read_file(dest_ / "d/x").value(), "second");
}

TEST_F(Unpack, FilterExtractsOnlyAcceptedMembers) {
  python(R"(
z = zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED)
for name in ['torch/include/ATen/ATen.h', 'torch/lib/libc10.so', 'torch/version.py',
             'torch/nn/functional.py', 'torch-2.5.0.dist-info/METADATA', 'torch/include/c10/']:
    z.writestr(name, '' if name.endswith('/') else name)
z.close()
)",
         file("torch.whl"));
  UnpackOptions options;
  std::vector<std::string> seen;
  options.filter = [&](std::string_view p) {
    seen.emplace_back(p);
    return p.rfind("torch/include/", 0) == 0 || p.rfind("torch/lib/", 0) == 0 ||
           p == "torch/version.py";
  };
  auto r = unpack(file("torch.whl"), dest_, options);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(listing(dest_),
            (std::set<std::string>{"torch/", "torch/include/", "torch/include/ATen/",
                                   "torch/include/ATen/ATen.h", "torch/include/c10/", "torch/lib/",
                                   "torch/lib/libc10.so", "torch/version.py"}));
  EXPECT_EQ(read_file(dest_ / "torch/lib/libc10.so").value(), "torch/lib/libc10.so");
  EXPECT_EQ(r->entries, 4u);
  EXPECT_EQ(r->top_level, std::vector<std::string>{"torch"});
  EXPECT_EQ(seen.back(), "torch/include/c10/");  // directories end with '/'
}

TEST_F(Unpack, DestinationThatExistsIsLeftAlone) {
  write_archive(file("a.tar"), {{"x", 'f', "x"}});
  fs::create_directories(dest_);
  std::ofstream(dest_ / "mine") << "mine";
  auto r = unpack(file("a.tar"), dest_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("already exists"), std::string::npos);
  EXPECT_EQ(listing(dest_), std::set<std::string>{"mine"});
}

// ---- hostile archives ----

TEST_F(Unpack, RejectsDotDot) {
  write_archive(file("dotdot.tar.gz"), {{"ok.txt", 'f', "ok"}, {"../x", 'f', "evil"}}, {"gzip"});
  expect_rejected(file("dotdot.tar.gz"), "member '../x' escapes the destination");
  write_archive(file("inner.tar"), {{"a/../../outside/x", 'f', "evil"}});
  expect_rejected(file("inner.tar"), "member 'a/../../outside/x' escapes");
}

TEST_F(Unpack, RejectsAbsolutePath) {
  write_archive(file("abs.tar"), {{"/etc/x", 'f', "evil"}});
  expect_rejected(file("abs.tar"), "member '/etc/x' is an absolute path");
}

TEST_F(Unpack, RejectsSymlinkToRootThenWriteThroughIt) {
  write_archive(file("root.tar"), {{"root", 'l', "", 0777, "/"}, {"root/tmp/pwned", 'f', "evil"}});
  expect_rejected(file("root.tar"), "member 'root' is a symlink to '/', an absolute path");
  std::string outside = (base_->path() / "outside").string();
  write_archive(file("abs-link.tar"),
                {{"esc", 'l', "", 0777, outside}, {"esc/pwned", 'f', "evil"}});
  expect_rejected(file("abs-link.tar"), "member 'esc' is a symlink");
}

TEST_F(Unpack, RejectsRelativeSymlinkOutThenWriteThroughIt) {
  // Extracted beside dest, "a" would point at <base>/outside.
  write_archive(file("rel.tar"), {{"a", 'l', "", 0777, "../../outside"}, {"a/y", 'f', "evil"}});
  expect_rejected(file("rel.tar"),
                  "member 'a' is a symlink to '../../outside', outside the destination");
  write_archive(file("x.tar"), {{"a", 'l', "", 0777, "../../x"}, {"a/y", 'f', "evil"}});
  expect_rejected(file("x.tar"), "member 'a'");
}

TEST_F(Unpack, RejectsWritingThroughAnInTreeSymlink) {
  write_archive(file("through.tar"), {{"d/", 'd'}, {"s", 'l', "", 0777, "d"}, {"s/f", 'f', "x"}});
  expect_rejected(file("through.tar"), "member 's/f' passes through symlink 's'");
}

TEST_F(Unpack, RejectsSymlinkThatEscapesThroughAnotherSymlink) {
  // Each link alone resolves inside as text; the kernel would take L to the parent of the tree.
  write_archive(file("chain.tar"),
                {{"a/b/c/s", 'l', "", 0777, "../../.."}, {"L", 'l', "", 0777, "a/b/c/s/../x"}});
  expect_rejected(file("chain.tar"),
                  "member 'L' is a symlink to 'a/b/c/s/../x' that leaves the destination");
  // The link it goes through arrives later.
  write_archive(file("late.tar"),
                {{"L", 'l', "", 0777, "a/s/../x"}, {"a/", 'd'}, {"a/s", 'l', "", 0777, ".."}});
  expect_rejected(file("late.tar"), "member 'L'");
}

TEST_F(Unpack, RejectsHardlinkOutOfTheTree) {
  write_archive(file("hl.tar"), {{"passwd", 'h', "", 0644, "../../../etc/passwd"}});
  expect_rejected(
      file("hl.tar"),
      "member 'passwd' is a hardlink to '../../../etc/passwd', outside the destination");
  write_archive(file("hl-abs.tar"), {{"passwd", 'h', "", 0644, "/etc/passwd"}});
  expect_rejected(file("hl-abs.tar"), "member 'passwd' is a hardlink");
  write_archive(file("hl-later.tar"), {{"h", 'h', "", 0644, "f"}, {"f", 'f', "x"}});
  expect_rejected(file("hl-later.tar"),
                  "member 'h' is a hardlink to 'f', which is not an earlier file member");
  write_archive(file("hl-dir.tar"), {{"d/", 'd'}, {"h", 'h', "", 0644, "d"}});
  expect_rejected(file("hl-dir.tar"), "member 'h' is a hardlink to 'd', which is not");
}

TEST_F(Unpack, RejectsDevicesAndFifos) {
  write_archive(file("chr.tar"), {{"null", 'c', "", 0666}});
  expect_rejected(file("chr.tar"), "member 'null' is a character device");
  write_archive(file("blk.tar"), {{"sda", 'b', "", 0660}});
  expect_rejected(file("blk.tar"), "member 'sda' is a block device");
  write_archive(file("fifo.tar"), {{"pipe", 'p', "", 0644}});
  expect_rejected(file("fifo.tar"), "member 'pipe' is a FIFO");
  python(R"(
z = zipfile.ZipFile(out, 'w')
i = zipfile.ZipInfo('sock'); i.external_attr = 0o140644 << 16; i.create_system = 3
z.writestr(i, b'')
z.close()
)",
         file("sock.zip"));
  expect_rejected(file("sock.zip"), "member 'sock' is a socket");
}

TEST_F(Unpack, RejectsSetuidSetgidSticky) {
  write_archive(file("suid.tar"), {{"bin/su", 'f', "x", 04755}});
  expect_rejected(file("suid.tar"),
                  "member 'bin/su' has setuid, setgid or sticky bits (mode 4755)");
  write_archive(file("sgid.tar"), {{"d/", 'd', "", 02755}});
  expect_rejected(file("sgid.tar"), "member 'd/' has setuid");
  write_archive(file("sticky.tar"), {{"t/", 'd', "", 01777}});
  expect_rejected(file("sticky.tar"), "member 't/' has setuid");
}

TEST_F(Unpack, RejectsDeclaredSizeOverTheCapBeforeWriting) {
  write_archive(file("big.tar.gz"),
                {{"small", 'f', "ok"}, {"big.bin", 'f', std::string(5000, 'z')}}, {"gzip"});
  UnpackOptions options;
  options.limits.max_entry_bytes = 4096;
  expect_rejected(file("big.tar.gz"),
                  "member 'big.bin' declares 5000 bytes, over the 4096-byte limit", options);
  options = {};
  options.limits.max_total_bytes = 4000;
  write_archive(file("total.tar"),
                {{"a", 'f', std::string(3000, 'a')}, {"b", 'f', std::string(3000, 'b')}});
  expect_rejected(file("total.tar"),
                  "member 'b' declares 3000 bytes, taking the archive over the 4000-byte limit",
                  options);
  // A zip bomb's declared size is caught the same way, before any inflating.
  python(
      "z = zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED)\nz.writestr('ok', b'ok')\n"
      "z.writestr('bomb', bytes(1 << 20))\nz.close()\n",
      file("bomb.zip"));
  options = {};
  options.limits.max_entry_bytes = 1 << 16;
  expect_rejected(file("bomb.zip"),
                  "member 'bomb' declares 1048576 bytes, over the 65536-byte limit", options);
}

TEST_F(Unpack, FilteredOutMembersAreStillChecked) {
  write_archive(file("f.tar"), {{"pkg/ok.h", 'f', "x"}, {"other/../../x", 'f', "evil"}});
  UnpackOptions options;
  options.filter = [](std::string_view p) { return p.rfind("pkg/", 0) == 0; };
  expect_rejected(file("f.tar"), "member 'other/../../x' escapes", options);
}

TEST_F(Unpack, RejectsTooManyEntries) {
  UnpackOptions options;
  options.limits.max_entries = 3;
  write_archive(file("many.tar"), {{"a", 'f'}, {"b", 'f'}, {"c", 'f'}, {"d", 'f'}});
  expect_rejected(file("many.tar"), "member 'd' is past the limit of 3 members", options);
  // Implicit parent directories count too.
  write_archive(file("deep.tar"), {{"a/b/c/d/e", 'f', "x"}});
  expect_rejected(file("deep.tar"),
                  "member 'a/b/c/d/e' takes the archive past the limit of 3 entries", options);
}

TEST_F(Unpack, RejectsZipMemberWithDotDot) {
  python(
      "z = zipfile.ZipFile(out, 'w')\nz.writestr('fine.txt', b'ok')\nz.writestr('../evil', "
      "b'evil')\nz.close()\n",
      file("evil.zip"));
  expect_rejected(file("evil.zip"), "member '../evil' escapes the destination");
}

TEST_F(Unpack, RejectsZipMemberLargerThanDeclared) {
  // Members whose headers declare 50 bytes: stored with 100, deflated to 100000 (a bomb that
  // passes the declared-size cap).
  for (const char* method : {"ZIP_STORED", "ZIP_DEFLATED"}) {
    SCOPED_TRACE(method);
    python(cat("size = 100 if '", method, "' == 'ZIP_STORED' else 100000\n", R"(
z = zipfile.ZipFile(out, 'w', getattr(zipfile, ')",
               method, R"('))
z.writestr('a', b'x' * size)
z.close()
b = bytearray(open(out, 'rb').read())
struct.pack_into('<I', b, 22, 50)
cd = b.index(b'PK\x01\x02')
struct.pack_into('<I', b, cd + 24, 50)
open(out, 'wb').write(b)
)"),
           file("liar.zip"));
    // Stored, the central directory's two sizes disagree: the structure check refuses it first.
    expect_rejected(file("liar.zip"), std::string(method) == "ZIP_STORED"
                                          ? "entry 'a' is stored but its sizes differ (100 != 50)"
                                          : "ZIP uncompressed data is wrong size");
  }
}

TEST_F(Unpack, RejectsTruncatedTarGz) {
  std::mt19937 rng(7);
  std::string noise(200000, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  write_archive(file("cut.tar.gz"), {{"pkg/first.txt", 'f', "first"}, {"pkg/big.bin", 'f', noise}},
                {"gzip"});
  fs::resize_file(file("cut.tar.gz"), fs::file_size(file("cut.tar.gz")) / 2);
  expect_rejected(file("cut.tar.gz"), "big.bin");
}

TEST_F(Unpack, RejectsCorruptZip) {
  python(R"(
z = zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED)
z.writestr('data.txt', ''.join(str(i) for i in range(5000)))
z.close()
b = bytearray(open(out, 'rb').read())
for k in range(200, 240): b[k] ^= 0x55
open(out, 'wb').write(b)
)",
         file("corrupt.zip"));
  expect_rejected(file("corrupt.zip"), "member 'data.txt'");
}

TEST_F(Unpack, RejectsDuplicateThatChangesType) {
  write_archive(file("fd.tar"), {{"x", 'f', "file"}, {"x/", 'd'}});
  expect_rejected(file("fd.tar"),
                  "member 'x/' is a directory but an earlier member made it a file");
  write_archive(file("df.tar"), {{"x/", 'd'}, {"x", 'f', "file"}});
  expect_rejected(file("df.tar"), "member 'x' is a file but an earlier member made it a directory");
  write_archive(file("lf.tar"), {{"x", 'l', "", 0777, "y"}, {"x", 'f', "file"}});
  expect_rejected(file("lf.tar"), "member 'x' is a file but an earlier member made it a symlink");
  write_archive(file("fthen.tar"), {{"x", 'f', "file"}, {"x/y", 'f', "file"}});
  expect_rejected(file("fthen.tar"),
                  "member 'x/y' passes through 'x', which an earlier member made a file");
  write_archive(file("ll.tar"), {{"x", 'l', "", 0777, "a"}, {"x", 'l', "", 0777, "b"}});
  expect_rejected(file("ll.tar"),
                  "member 'x' is a symlink to 'b' but an earlier member made it a symlink to 'a'");
}

TEST_F(Unpack, RejectsEmptyName) {
  // "." as a file: nothing is left of the name once "." components go.
  python("z = zipfile.ZipFile(out, 'w')\nz.writestr('./.', b'x')\nz.close()\n", file("empty.zip"));
  expect_rejected(file("empty.zip"), "member './.' has an empty name");
  write_archive(file("empty.tar"), {{".", 'f', "x"}});
  expect_rejected(file("empty.tar"), "member '.' has an empty name");
  // "./" as a directory is the destination itself, which is fine.
  write_archive(file("dot.tar"), {{"./", 'd'}, {"./a", 'f', "a"}});
  auto r = unpack(file("dot.tar"), dest_);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_EQ(r->top_level, std::vector<std::string>{"a"});
}

TEST_F(Unpack, RejectsUnsupportedFormats) {
  write_archive(file("x.cpio"), {{"a", 'f', "x"}}, {}, "cpio");
  expect_rejected(file("x.cpio"), "unsupported archive format");
  write_archive(file("x.a"), {{"a.o", 'f', "x"}}, {}, "ar");
  expect_rejected(file("x.a"), "unsupported archive format");
  write_archive(file("x.7z"), {{"a", 'f', "x"}}, {}, "7zip");
  expect_rejected(file("x.7z"), "unsupported archive format");
  write_archive(file("x.tar.gz.gz"), {{"a", 'f', "x"}}, {"gzip", "gzip"});
  expect_rejected(file("x.tar.gz.gz"), "unsupported archive format");
  std::ofstream(file("notes.txt")) << "just some text, not an archive\n";
  expect_rejected(file("notes.txt"), "unsupported archive format");
}

TEST_F(Unpack, ZipSymlinkOutOfTheTreeIsRejected) {
  python(R"(
z = zipfile.ZipFile(out, 'w')
i = zipfile.ZipInfo('lib'); i.external_attr = 0o120777 << 16; i.create_system = 3
z.writestr(i, b'../../outside')
z.writestr('lib/evil.so', b'evil')
z.close()
)",
         file("link.zip"));
  expect_rejected(file("link.zip"),
                  "member 'lib' is a symlink to '../../outside', outside the destination");
}

// Names that break a RECORD row for installers (pip splits RECORD with str.splitlines()).
TEST_F(Unpack, RejectsControlCharactersInNames) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"pkg/x\r/evil.py", "\\x0d"},    {"pkg/a\nb", "\\x0a"},       {"pkg/a\x0b", "\\x0b"},
      {"pkg/a\x1c", "\\x1c"},          {"pkg/a\xc2\x85", "U+0085"}, {"pkg/a\xe2\x80\xa8", "U+2028"},
      {"pkg/a\xe2\x80\xa9", "U+2029"}, {"pkg/a\x7f", "\\x7f"}};
  for (const auto& [name, shown] : cases) {
    SCOPED_TRACE(name);
    write_archive(file("names.tar"), {{"pkg/ok.py", 'f', "x"}, {name, 'f', "x"}});
    expect_rejected(file("names.tar"), cat("has a control character (", shown, ") in its name"));
    python(cat(
               "z = zipfile.ZipFile(out, 'w')\nz.writestr('pkg/ok.py', b'x')\nz.writestr(",
               "bytes.fromhex('",
               [&] {
                 std::string hex;
                 for (unsigned char c : name)
                   hex += cat("0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
                 return hex;
               }(),
               "').decode(), b'x')\nz.close()\n"),
           file("names.zip"));
    expect_rejected(file("names.zip"), "has a control character");
  }
}

// A member's CRC (zip) and the gzip trailer's CRC and size: libarchive only warns about the first
// and never reads the second (it stops at the tar end marker).
TEST_F(Unpack, RejectsBadChecksums) {
  python(R"(
z = zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED)
z.writestr('pkg/data.txt', b'hello world\n' * 100)
z.close()
b = bytearray(open(out, 'rb').read())
import zlib
crc = struct.pack('<I', zlib.crc32(b'hello world\n' * 100))
b = bytes(b).replace(crc, struct.pack('<I', zlib.crc32(b'hello world\n' * 100) ^ 16))
open(out, 'wb').write(b)
)",
         file("crc.zip"));
  expect_rejected(file("crc.zip"), "ZIP bad CRC");
  write_archive(file("good.tar.gz"), {{"pkg/a.txt", 'f', std::string(5000, 'a')}}, {"gzip"});
  std::string gz = read_file(file("good.tar.gz")).value();
  ASSERT_TRUE(unpack(file("good.tar.gz"), dest_));
  fs::remove_all(dest_);
  std::string crc = gz, length = gz;
  crc[crc.size() - 8] ^= 1;
  length[length.size() - 1] ^= 1;
  std::ofstream(file("crc.tar.gz"), std::ios::binary) << crc;
  std::ofstream(file("length.tar.gz"), std::ios::binary) << length;
  expect_rejected(file("crc.tar.gz"), "corrupt gzip data (incorrect data check)");
  expect_rejected(file("length.tar.gz"), "corrupt gzip data (incorrect length check)");
  // Zero padding after the stream is fine (some tools pad to a block); anything else is not.
  std::ofstream(file("padded.tar.gz"), std::ios::binary) << gz << std::string(512, '\0');
  ASSERT_TRUE(unpack(file("padded.tar.gz"), dest_));
  fs::remove_all(dest_);
  std::ofstream(file("trailing.tar.gz"), std::ios::binary) << gz << "junk";
  expect_rejected(file("trailing.tar.gz"), "data follows the end of its gzip stream");
  // Two gzip members, one after the other, are one stream (gzip -c a b).
  write_archive(file("two.tar.gz.src"), {{"pkg/a.txt", 'f', std::string(5000, 'a')}});
  python(cat("import gzip\nt = open(out + '.src', 'rb').read()\n",
             "open(out, 'wb').write(gzip.compress(t[:3000]) + gzip.compress(t[3000:]))\n"),
         file("two.tar.gz"));
  auto two = unpack(file("two.tar.gz"), dest_);
  ASSERT_TRUE(two) << two.error().message;
  EXPECT_EQ(read_file(dest_ / "pkg/a.txt").value(), std::string(5000, 'a'));
}

// xz and bzip2 streams are checked to their end as well: here 512 KiB of zero padding follow the
// tar's end marker, so the tar reader stops long before the stream's last check (xz: the footer's
// CRC; bzip2: the stream CRC), which only reading the stream to its end finds.
TEST_F(Unpack, RejectsCorruptXzAndBzip2Ends) {
  for (const std::string& kind : {std::string("xz"), std::string("bz2")}) {
    SCOPED_TRACE(kind);
    for (bool corrupt : {false, true}) {
      python(cat(R"(
import io, tarfile, lzma, bz2
b = io.BytesIO()
with tarfile.open(fileobj=b, mode='w') as t:
    i = tarfile.TarInfo('pkg/a.txt'); i.size = 5; t.addfile(i, io.BytesIO(b'hello'))
raw = b.getvalue() + bytes(512 * 1024)
data = bytearray(lzma.compress(raw) if ')",
                 kind, R"(' == 'xz' else bz2.compress(raw))
if )",
                 corrupt ? "True" : "False", R"(:
    data[-10 if ')",
                 kind, R"(' == 'xz' else -2] ^= 1
open(out, 'wb').write(data)
)"),
             file("padded.tar." + kind));
      if (!corrupt) {
        auto r = unpack(file("padded.tar." + kind), dest_);
        ASSERT_TRUE(r) << r.error().message;
        fs::remove_all(dest_);
      } else {
        expect_rejected(file("padded.tar." + kind), "corrupt compressed data");
      }
    }
  }
}

// libarchive takes a member's name from its local header and silently drops one of two
// overlapping members; the strict zip reader refuses both archives first.
TEST_F(Unpack, RejectsZipsWhoseStructureDisagrees) {
  python(R"(
z = zipfile.ZipFile(out, 'w')
z.writestr('pkg/__init__.py', b'x')
z.close()
b = open(out, 'rb').read().replace(b'pkg/__init__.py', b'pkg/__evil__.py', 1)
open(out, 'wb').write(b)
)",
         file("renamed.zip"));
  expect_rejected(file("renamed.zip"),
                  "local header names it 'pkg/__evil__.py'; the central directory disagrees");
  python(R"(
z = zipfile.ZipFile(out, 'w')
z.writestr('pkg/a.py', b'one')
z.writestr('pkg/b.py', b'two')
z.close()
b = bytearray(open(out, 'rb').read())
cd = b.rfind(b'PK\x01\x02')
struct.pack_into('<I', b, cd + 42, 0)
open(out, 'wb').write(b)
)",
         file("overlap.zip"));
  expect_rejected(file("overlap.zip"), "entry 'pkg/b.py'");
}

}  // namespace
}  // namespace kiln::archive
