#include "fetch/simple_index.h"

#include <gtest/gtest.h>

namespace kiln::fetch {

const std::string kPage = "https://index.example/simple/demo/";
const std::string kSha = "ab0000000000000000000000000000000000000000000000000000000000000a";

TEST(FetchSimpleIndex, JsonPage) {
  std::string text = R"({
    "meta": {"api-version": "1.1"},
    "name": "demo",
    "files": [
      {"filename": "demo-1.0.tar.gz", "url": "../../files/demo-1.0.tar.gz#sha256=ff", "hashes": {"sha256": "AB0000000000000000000000000000000000000000000000000000000000000A"}, "size": 1234},
      {"filename": "demo-1.0-py3-none-any.whl", "url": "https://cdn.example/demo-1.0-py3-none-any.whl#sha256=cd", "hashes": {}},
      {"filename": "demo-0.9.zip", "url": "/x/demo-0.9.zip", "hashes": {"md5": "00"}, "yanked": true}
    ]})";
  auto files = parse_json_page(text, kPage).value();
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(files[0].filename, "demo-1.0.tar.gz");
  EXPECT_EQ(files[0].url, "https://index.example/files/demo-1.0.tar.gz");
  EXPECT_EQ(files[0].sha256, kSha);  // hashes win over the fragment, lowercased
  EXPECT_EQ(files[0].size, 1234u);   // PEP 700: it bounds the download
  EXPECT_FALSE(files[1].size);
  EXPECT_EQ(files[1].url, "https://cdn.example/demo-1.0-py3-none-any.whl");
  EXPECT_EQ(files[1].sha256, "cd");  // no hashes: the fragment
  EXPECT_EQ(files[2].url, "https://index.example/x/demo-0.9.zip");
  EXPECT_EQ(files[2].sha256, "");
}

TEST(FetchSimpleIndex, LinksThatAreNotHttpAreLeftOut) {
  // A stranger's page may not make kiln read a local file: file://, and any other scheme, through
  // a link, a <base> or a PEP 691 url; relative links stay relative to the (http) page.
  std::string json = R"({"meta": {"api-version": "1.1"}, "files": [
      {"filename": "torch-2.11.0-cp311-cp311-linux_x86_64.whl", "url": "file:///etc/passwd"},
      {"filename": "a.whl", "url": "FILE:///proc/kmsg"},
      {"filename": "b.whl", "url": "ftp://x/b.whl"},
      {"filename": "c.whl", "url": "data:,x"},
      {"filename": "d.whl", "url": "d.whl"}]})";
  LeftOut left_out;
  auto files = parse_json_page(json, kPage, &left_out).value();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].url, kPage + "d.whl");
  EXPECT_EQ(left_out.count, 4u);
  EXPECT_EQ(left_out.first, "file:///etc/passwd");
  std::string html = R"(<a href="file:///etc/passwd">x.whl</a><a href="y.whl">y.whl</a>
      <base href="file:///etc/"><a href="passwd">passwd.whl</a>)";
  files = parse_html_page(html, kPage).value();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].url, kPage + "y.whl");
  // Relative links of a page that is itself no http(s) page: left out too.
  EXPECT_TRUE(parse_html_page("<a href=\"x.whl\">x.whl</a>", "file:///srv/simple/x/")->empty());
}

TEST(FetchSimpleIndex, JsonErrors) {
  EXPECT_FALSE(parse_json_page("not json", kPage));
  EXPECT_FALSE(parse_json_page("[]", kPage));
  EXPECT_FALSE(parse_json_page(R"({"name": "x"})", kPage));
  EXPECT_FALSE(parse_json_page(R"({"files": [{"filename": 1, "url": "x"}]})", kPage));
  auto v2 = parse_json_page(R"({"meta": {"api-version": "2.0"}, "files": []})", kPage);
  ASSERT_FALSE(v2);
  EXPECT_EQ(v2.error().message,
            "index page " + kPage + " uses PEP 691 API version \"2.0\"; kiln reads version 1");
  EXPECT_TRUE(parse_json_page(R"({"files": []})", kPage).value().empty());
}

TEST(FetchSimpleIndex, HtmlPage) {
  std::string html = R"(<!DOCTYPE html>
<html><head><meta name="pypi:repository-version" content="1.1"><title>Links for demo</title></head>
<body><h1>Links for demo</h1>
<!-- <a href="commented-out.tar.gz">commented-out.tar.gz</a> -->
<a href="../../files/demo-1.0.tar.gz#sha256=AB0000000000000000000000000000000000000000000000000000000000000A" data-requires-python="&gt;=3.8">demo-1.0.tar.gz</a><br/>
<A HREF='/whl/demo-1.0%2Bcu130-py3-none-any.whl#sha256=cd' data-dist-info-metadata="sha256=ee">demo-1.0+cu130-py3-none-any.whl</A>
<a href=https://cdn.example/demo-0.9.zip?a=1&amp;b=2>  <span>demo-0.9.zip</span> </a>
<a href="demo-0.8.tar.gz"></a>
<a name="no-href">nothing</a>
</body></html>)";
  auto files = parse_html_page(html, kPage).value();
  ASSERT_EQ(files.size(), 4u);
  EXPECT_EQ(files[0].filename, "demo-1.0.tar.gz");
  EXPECT_EQ(files[0].url, "https://index.example/files/demo-1.0.tar.gz");
  EXPECT_EQ(files[0].sha256, kSha);
  EXPECT_EQ(files[1].filename, "demo-1.0+cu130-py3-none-any.whl");
  EXPECT_EQ(files[1].url, "https://index.example/whl/demo-1.0%2Bcu130-py3-none-any.whl");
  EXPECT_EQ(files[1].sha256, "cd");
  EXPECT_EQ(files[2].filename, "demo-0.9.zip");
  EXPECT_EQ(files[2].url, "https://cdn.example/demo-0.9.zip?a=1&b=2");
  EXPECT_EQ(files[2].sha256, "");
  EXPECT_EQ(files[3].filename, "demo-0.8.tar.gz");  // empty text: the URL's file name
  EXPECT_EQ(files[3].url, kPage + "demo-0.8.tar.gz");
}

TEST(FetchSimpleIndex, HtmlBaseTagAndEntities) {
  auto files =
      parse_html_page(
          R"(<base href="https://mirror.example/pkgs/"><a href="a&#45;1.tar.gz">a&#x2D;1.tar.gz</a>)",
          kPage)
          .value();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].url, "https://mirror.example/pkgs/a-1.tar.gz");
  EXPECT_EQ(files[0].filename, "a-1.tar.gz");
}

TEST(FetchSimpleIndex, HostileHtmlDoesNotCrash) {
  for (std::string html : std::vector<std::string>{
           "<", "<a", "<a href", "<a href=\"x", "<a href='x'>unclosed", "<!--",
           "&#99999999999;<a href=x>&#xFFFFFFFFF;</a>", std::string(10000, '<')}) {
    auto files = parse_html_page(html, kPage);
    EXPECT_TRUE(files) << html;
  }
}

TEST(FetchSimpleIndex, ContentTypePicksTheParser) {
  std::string json = R"({"files": [{"filename": "a.tar.gz", "url": "a.tar.gz", "hashes": {}}]})";
  std::string html = R"(<a href="b.tar.gz">b.tar.gz</a>)";
  EXPECT_EQ(
      parse_project_page(json, "application/vnd.pypi.simple.v1+json", kPage).value()[0].filename,
      "a.tar.gz");
  EXPECT_EQ(parse_project_page(html, "text/html; charset=utf-8", kPage).value()[0].filename,
            "b.tar.gz");
  EXPECT_EQ(
      parse_project_page(html, "application/vnd.pypi.simple.v1+html", kPage).value()[0].filename,
      "b.tar.gz");
  EXPECT_EQ(parse_project_page(json, "", kPage).value()[0].filename, "a.tar.gz");
  EXPECT_EQ(parse_project_page(html, "application/octet-stream", kPage).value()[0].filename,
            "b.tar.gz");
}

}  // namespace kiln::fetch
