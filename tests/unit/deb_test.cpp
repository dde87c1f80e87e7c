#include "archive/deb.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::archive {
namespace {

namespace fs = std::filesystem;

struct ArMember {
  std::string name;
  char type = 'f';  // f file, l symlink, c char device
  std::string data;
  std::string link;
};

// A tar (ustar) in memory, written by libarchive as given (hostile names too).
std::string tar_of(const std::vector<ArMember>& members, const std::string& filter = "") {
  std::vector<char> buf(1 << 20);
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (!filter.empty()) archive_write_add_filter_by_name(a, filter.c_str());
  EXPECT_EQ(archive_write_open_memory(a, buf.data(), buf.size(), &used), ARCHIVE_OK);
  for (const auto& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_perm(e, 0755);
    archive_entry_set_size(e, 0);
    if (m.type == 'l') {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, m.link.c_str());
    } else if (m.type == 'c') {
      archive_entry_set_filetype(e, AE_IFCHR);
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    archive_write_header(a, e);
    if (m.type == 'f') archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

// One ar member: the 60-byte header as `ar` writes it, the data, padding to an even offset.
std::string ar_member(const std::string& name, const std::string& data, const char* mode = "100644",
                      std::size_t declared = std::string::npos) {
  char header[61];
  std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0",
                "0", mode, declared == std::string::npos ? data.size() : declared);
  std::string out(header, 60);
  out += data;
  if (out.size() % 2) out += '\n';
  return out;
}

std::string deb_of(const std::string& data_tar, const std::string& data_name = "data.tar") {
  return "!<arch>\n" + ar_member("debian-binary", "2.0\n") +
         ar_member("control.tar", tar_of({{"./control", 'f', "Package: x\n"}})) +
         ar_member(data_name, data_tar);
}

class Deb : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           cat("kiln-deb-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& bytes, const std::string& name = "x.deb") {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // Unpacks with a filter that takes usr/ only, skipping what it rejects (as the toolkit does).
  Expected<UnpackResult> unpack_usr(const fs::path& deb) {
    UnpackOptions options;
    options.filter = [](std::string_view p) { return p.starts_with("usr/"); };
    options.skip_rejected = true;
    return unpack_deb(deb, dir_ / "out", options);
  }
  // Nothing but the package is left in the directory (no output, no temporary).
  void expect_nothing_left() {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
    EXPECT_EQ(names, std::vector<std::string>{"x.deb"});
  }

  fs::path dir_;
};

const std::vector<ArMember> kGood = {
    {"./usr/bin/ptxas", 'f', "ELF"},
    {"./usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127", 'f', "lib"},
    {"./usr/lib/x86_64-linux-gnu/libcudart.so.12", 'l', "", "libcudart.so.12.4.127"},
    {"./etc/nvcc.profile", 'f', "PATH += /usr/lib"},
    {"./etc/alternatives/nvcc.profile", 'l', "", "/etc/nvcc.profile"},
};

TEST_F(Deb, ExtractsTheDataMembersTheFilterTakes) {
  for (const char* filter : {"", "gzip", "xz", "zstd"}) {
    SCOPED_TRACE(filter);
    std::string name = cat("data.tar", *filter == 0                    ? ""
                                       : std::string(filter) == "gzip" ? ".gz"
                                       : std::string(filter) == "xz"   ? ".xz"
                                                                       : ".zst");
    auto r = unpack_usr(write(deb_of(tar_of(kGood, filter), name)));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(read_file(dir_ / "out/usr/bin/ptxas").value(), "ELF");
    EXPECT_EQ(fs::read_symlink(dir_ / "out/usr/lib/x86_64-linux-gnu/libcudart.so.12"),
              "libcudart.so.12.4.127");
    // The link to /etc is skipped, not made and not an error; /etc is not taken.
    EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "out/etc")));
    fs::remove_all(dir_ / "out");
    expect_nothing_left();
  }
}

TEST_F(Deb, WithoutSkipRejectedALinkToAnAbsolutePathIsStillRefused) {
  fs::path deb = write(deb_of(tar_of(kGood)));
  UnpackOptions options;
  options.filter = [](std::string_view p) { return p.starts_with("usr/bin/"); };
  auto r = unpack_deb(deb, dir_ / "out", options);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("an absolute path"), std::string::npos) << r.error().message;
  expect_nothing_left();
}

TEST_F(Deb, TheGeneralUnpackerRefusesAr) {
  fs::path deb = write(deb_of(tar_of(kGood)));
  auto r = unpack(deb, dir_ / "out");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
  EXPECT_NE(r.error().message.find("unsupported archive format"), std::string::npos)
      << r.error().message;
}

TEST_F(Deb, HostileDataMembersAreRefusedAndNothingIsLeft) {
  const std::vector<std::pair<std::vector<ArMember>, std::string>> cases = {
      {{{"usr/../../evil", 'f', "x"}}, "'..'"},
      {{{"/usr/bin/evil", 'f', "x"}}, "absolute path"},
      {{{"usr/include/up", 'l', "", "../../../etc"}}, "outside the destination"},
      {{{"usr/include/a", 'l', "", "b/../.."}, {"usr/include/b", 'l', "", ".."}},
       "leaves the destination"},
      {{{"usr/include/l", 'l', "", "."}, {"usr/include/l/x", 'f', "x"}}, "symlink"},
      {{{"usr/dev", 'c'}}, "character device"},
  };
  for (const auto& [members, why] : cases) {
    SCOPED_TRACE(why);
    auto r = unpack_usr(write(deb_of(tar_of(members))));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("package x.deb"), std::string::npos) << r.error().message;
    expect_nothing_left();
  }
}

TEST_F(Deb, ArMemberNameTricksAndOrderAreRefused) {
  std::string data = tar_of(kGood);
  std::string control = ar_member("control.tar", tar_of({}));
  std::string version = ar_member("debian-binary", "2.0\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      // A name that walks out, a GNU-style "name/", a BSD long name, and the GNU string table.
      {"!<arch>\n" + version + control + ar_member("../data.tar", data), "unexpected member"},
      {"!<arch>\n" + version + control + ar_member("data.tar/x", data), "unexpected member"},
      {"!<arch>\n" + version + control + ar_member("#1/20", "data.tar/../../evil" + data),
       "unexpected member"},
      {"!<arch>\n" + ar_member("//", "data.tar.xz/\n") + version + control + ar_member("/0", data),
       "unexpected member"},
      // Out of order, a member too many, one missing.
      {"!<arch>\n" + control + version + ar_member("data.tar", data), "unexpected member"},
      {"!<arch>\n" + version + control + ar_member("data.tar", data) +
           ar_member("_gpgorigin", "sig"),
       "unexpected member"},
      {"!<arch>\n" + version + control, "no data.tar member"},
      // Not format 2.
      {"!<arch>\n" + ar_member("debian-binary", "3.0\n") + control + ar_member("data.tar", data),
       "not a format 2.x"},
      {"not an ar archive at all", "not a Debian package"},
  };
  for (const auto& [bytes, why] : cases) {
    SCOPED_TRACE(why);
    auto r = unpack_usr(write(bytes));
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    EXPECT_NE(r.error().message.find(why), std::string::npos) << r.error().message;
    expect_nothing_left();
  }
}

TEST_F(Deb, TruncatedPackagesAreRefused) {
  std::string deb = deb_of(tar_of(kGood, "xz"), "data.tar.xz");
  for (std::size_t cut : {deb.size() - 1, deb.size() - 100, std::size_t(140), std::size_t(70),
                          std::size_t(30), std::size_t(8)}) {
    SCOPED_TRACE(cut);
    auto r = unpack_usr(write(deb.substr(0, cut)));
    ASSERT_FALSE(r);
    EXPECT_FALSE(r.error().message.empty());
    expect_nothing_left();
  }
  // A member that declares more bytes than the file holds.
  std::string lying = "!<arch>\n" + ar_member("debian-binary", "2.0\n") +
                      ar_member("control.tar", tar_of({})) +
                      ar_member("data.tar", tar_of(kGood), "100644", 1u << 20);
  EXPECT_FALSE(unpack_usr(write(lying)));
  expect_nothing_left();
}

TEST_F(Deb, SizeCaps) {
  fs::path deb = write(deb_of(tar_of(kGood)));
  DebLimits limits;
  limits.max_data_bytes = 100;
  UnpackOptions options;
  auto r = unpack_deb(deb, dir_ / "out", options, limits);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("-byte limit"), std::string::npos) << r.error().message;
  expect_nothing_left();
}

TEST(DebMember, Names) {
  EXPECT_TRUE(is_deb_member(0, "debian-binary"));
  EXPECT_TRUE(is_deb_member(1, "control.tar.xz"));
  EXPECT_TRUE(is_deb_member(2, "data.tar.zst"));
  EXPECT_FALSE(is_deb_member(2, "data.tar.lzma"));
  EXPECT_FALSE(is_deb_member(1, "data.tar"));
  EXPECT_FALSE(is_deb_member(3, "data.tar"));
  EXPECT_FALSE(is_deb_member(0, "debian-binary/"));
}

}  // namespace
}  // namespace kiln::archive
