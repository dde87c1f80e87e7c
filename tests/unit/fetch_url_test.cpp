#include "fetch/url.h"

#include <gtest/gtest.h>

namespace kiln::fetch {

TEST(FetchUrl, ResolvesLikeRfc3986) {
  // RFC 3986 section 5.4.1 and 5.4.2.
  const std::string base = "http://a/b/c/d;p?q";
  const std::pair<const char*, const char*> cases[] = {
      {"g:h", "g:h"},
      {"g", "http://a/b/c/g"},
      {"./g", "http://a/b/c/g"},
      {"g/", "http://a/b/c/g/"},
      {"/g", "http://a/g"},
      {"//g", "http://g"},
      {"?y", "http://a/b/c/d;p?y"},
      {"g?y", "http://a/b/c/g?y"},
      {"#s", "http://a/b/c/d;p?q#s"},
      {"g#s", "http://a/b/c/g#s"},
      {"", "http://a/b/c/d;p?q"},
      {".", "http://a/b/c/"},
      {"./", "http://a/b/c/"},
      {"..", "http://a/b/"},
      {"../", "http://a/b/"},
      {"../g", "http://a/b/g"},
      {"../..", "http://a/"},
      {"../../g", "http://a/g"},
      {"../../../g", "http://a/g"},
      {"../../../../g", "http://a/g"},
      {"/./g", "http://a/g"},
      {"/../g", "http://a/g"},
      {"g.", "http://a/b/c/g."},
      {"..g", "http://a/b/c/..g"},
      {"./../g", "http://a/b/g"},
      {"g/./h", "http://a/b/c/g/h"},
      {"g/../h", "http://a/b/c/h"},
  };
  for (const auto& [ref, want] : cases) EXPECT_EQ(resolve_url(base, ref), want) << ref;
}

TEST(FetchUrl, ResolvesIndexLinks) {
  EXPECT_EQ(resolve_url("https://pypi.org/simple/torch/",
                        "../../packages/ab/cd/torch-2.11.0.whl#sha256=00"),
            "https://pypi.org/packages/ab/cd/torch-2.11.0.whl#sha256=00");
  EXPECT_EQ(
      resolve_url("https://download.pytorch.org/whl/torch/", "/whl/cu130/torch-2.11.0%2Bcu130.whl"),
      "https://download.pytorch.org/whl/cu130/torch-2.11.0%2Bcu130.whl");
  EXPECT_EQ(resolve_url("https://a.example/simple/x/", "https://files.example/x.whl"),
            "https://files.example/x.whl");
  EXPECT_EQ(resolve_url("https://a.example/simple/x/", "//cdn.example/x.whl"),
            "https://cdn.example/x.whl");
}

TEST(FetchUrl, FragmentsAndNames) {
  EXPECT_EQ(strip_fragment("https://x/a.whl#sha256=ab"), "https://x/a.whl");
  EXPECT_EQ(fragment("https://x/a.whl#sha256=ab"), "sha256=ab");
  EXPECT_EQ(fragment("https://x/a.whl"), "");
  EXPECT_EQ(url_filename("https://x/p/torch-2.1.0%2Bcu121-cp311.whl?x=1#f"),
            "torch-2.1.0+cu121-cp311.whl");
  EXPECT_EQ(url_filename("https://x/p/"), "");
  EXPECT_EQ(url_filename("https://x"), "");
  EXPECT_EQ(percent_decode("a%20b%2fc%zz%4"), "a b/c%zz%4");
}

TEST(FetchUrl, FileUrls) {
  EXPECT_TRUE(is_file_url("FILE:///x"));
  EXPECT_EQ(file_url_path("file:///tmp/a%20b.tar.gz"), "/tmp/a b.tar.gz");
  EXPECT_EQ(file_url_path("file://localhost/tmp/a"), "/tmp/a");
  EXPECT_EQ(file_url_path("file://otherhost/tmp/a"), "");
  EXPECT_EQ(file_url_path("https://x/a"), "");
  EXPECT_TRUE(is_http_url("HTTPS://x"));
  EXPECT_FALSE(is_http_url("ftp://x"));
}

TEST(FetchUrl, RedactsPasswords) {
  EXPECT_EQ(redact_url("https://user:secret@host.example/simple/"),
            "https://user:***@host.example/simple/");
  EXPECT_EQ(redact_url("https://token@host.example/simple/"), "https://token@host.example/simple/");
  EXPECT_EQ(redact_url("https://host.example/a@b"), "https://host.example/a@b");
}

// What `kiln fetch --print-sha256 URL` writes for a manifest holds no credentials at all.
TEST(FetchUrl, WithoutUserinfo) {
  EXPECT_EQ(without_userinfo("http://user:SECRET@host:8080/a/b.tar.gz?x=1#f"),
            "http://host:8080/a/b.tar.gz?x=1#f");
  EXPECT_EQ(without_userinfo("https://token@host.example/x"), "https://host.example/x");
  EXPECT_EQ(without_userinfo("https://host.example/a@b"), "https://host.example/a@b");
  EXPECT_EQ(without_userinfo("file:///tmp/a@b"), "file:///tmp/a@b");
}

TEST(FetchUrl, SafeFileNames) {
  EXPECT_TRUE(is_safe_filename("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"));
  EXPECT_TRUE(is_safe_filename("a b+c.tar.gz"));
  for (std::string bad : std::vector<std::string>{
           "", ".", "..", "a/b", "/a", std::string("a\0b", 3), "a\tb", std::string(256, 'x')})
    EXPECT_FALSE(is_safe_filename(bad)) << bad;
}

}  // namespace kiln::fetch
