#include "fetch/debian_mirror.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "core/strings.h"

namespace kiln::fetch {
namespace {

namespace fs = std::filesystem;

using Uris = std::vector<std::string>;

TEST(DebianMirror, OneLineStyle) {
  const char* text = R"(# comment
deb-src http://deb.debian.org/debian bookworm main
deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.example/debian/ trixie main non-free
  deb	http://deb.debian.org/debian-security bookworm-security main   # trailing
deb [ trusted=yes ] https://other.example/debian sid main
deb
#deb http://commented.example/debian x main
)";
  EXPECT_EQ(one_line_deb_uris(text),
            (Uris{"http://mirror.example/debian/", "http://deb.debian.org/debian-security",
                  "https://other.example/debian"}));
}

TEST(DebianMirror, Deb822Style) {
  const char* text = R"(Types: deb-src
URIs: http://src.example/debian
Suites: bookworm

# a comment
Types: deb deb-src
URIs: http://one.example/debian
  http://two.example/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: http://disabled.example/debian

types: deb
uris: http://lower.example/debian
)";
  EXPECT_EQ(deb822_deb_uris(text), (Uris{"http://one.example/debian", "http://two.example/debian",
                                         "http://lower.example/debian"}));
}

TEST(DebianMirror, WhichUrisAreDebianArchives) {
  EXPECT_TRUE(is_debian_archive_uri("http://deb.debian.org/debian"));
  EXPECT_TRUE(is_debian_archive_uri("https://mirror.example/pub/debian/"));
  EXPECT_FALSE(is_debian_archive_uri("http://deb.debian.org/debian-security"));
  EXPECT_FALSE(is_debian_archive_uri("http://archive.ubuntu.com/ubuntu"));
  EXPECT_FALSE(is_debian_archive_uri("ftp://deb.debian.org/debian"));
  EXPECT_FALSE(is_debian_archive_uri("file:///srv/debian"));
  EXPECT_FALSE(is_debian_archive_uri("http:///debian"));
  EXPECT_FALSE(is_debian_archive_uri("http://deb.debian.org/debian\"x"));
  EXPECT_FALSE(is_debian_archive_uri("http://x/" + std::string(3000, 'a') + "/debian"));
}

class DebianMirrorDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           cat("kiln-apt-", ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "sources.list.d");
    ::unsetenv("KILN_DEBIAN_MIRROR");
  }
  void TearDown() override {
    fs::remove_all(dir_);
    ::unsetenv("KILN_DEBIAN_MIRROR");
  }
  void put(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  fs::path dir_;
};

TEST_F(DebianMirrorDir, FirstDebianArchiveAcrossFilesInOrder) {
  put("sources.list", "deb http://security.example/debian-security bookworm-security main\n");
  put("sources.list.d/b.sources", "Types: deb\nURIs: http://b.example/debian/\nSuites: trixie\n");
  put("sources.list.d/a.list", "deb http://ppa.example/ubuntu jammy main\n");
  put("sources.list.d/c.list", "deb http://c.example/debian trixie main\n");
  put("sources.list.d/z.list.disabled", "deb http://disabled.example/debian trixie main\n");
  EXPECT_EQ(debian_mirror(dir_).value(), "http://b.example/debian");
}

TEST_F(DebianMirrorDir, EnvironmentOverrides) {
  put("sources.list", "deb http://deb.debian.org/debian bookworm main\n");
  ::setenv("KILN_DEBIAN_MIRROR", "http://127.0.0.1:8080/debian/", 1);
  EXPECT_EQ(debian_mirror(dir_).value(), "http://127.0.0.1:8080/debian");
  ::setenv("KILN_DEBIAN_MIRROR", "file:///srv/mirror", 1);
  EXPECT_EQ(debian_mirror(dir_).value(), "file:///srv/mirror");
  ::setenv("KILN_DEBIAN_MIRROR", "gopher://x/debian", 1);
  EXPECT_FALSE(debian_mirror(dir_));
}

TEST_F(DebianMirrorDir, NoneConfigured) {
  put("sources.list", "deb http://archive.ubuntu.com/ubuntu jammy main\n");
  auto m = debian_mirror(dir_);
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message.find("KILN_DEBIAN_MIRROR"), std::string::npos);
  EXPECT_FALSE(debian_mirror(dir_ / "missing"));
}

}  // namespace
}  // namespace kiln::fetch
