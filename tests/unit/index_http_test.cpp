// index/http: the pure request handler of `kiln serve`: negotiation, redirects, %2B, traversal,
// Range/HEAD/ETag, methods and the token.
#include "index/http.h"

#include <gtest/gtest.h>

#include "core/hash.h"
#include "core/strings.h"
#include "index_testutil.h"

namespace kiln::index {

namespace {

constexpr const char* kCausal =
    "causal_conv1d-1.7.0+cu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl";
constexpr const char* kCausalEscaped =
    "causal_conv1d-1.7.0%2Bcu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl";
constexpr const char* kPip =
    "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; "
    "q=0.01";

const IndexModel& model() {
  static const IndexModel m = [] {
    WheelEntry a;
    a.target = "default";
    a.key = "k1";
    a.filename = kCausal;
    a.sha256 = sha256_hex("wheel");
    a.size = 1000;
    a.committed_at = 1796014860;
    a.dir = "/cache/wheels/k1";
    a.metadata = testutil::metadata_text("causal-conv1d", "1.7.0+cu130torch2.11");
    WheelEntry b = a;
    b.target = "default-sm90-sm120-ptx120";
    b.key = "k2";
    b.dir = "/cache/wheels/k2";
    b.sha256 = sha256_hex("other wheel");
    b.attestation = "{\"payload\":\"\"}\n";  // only this target's build was signed
    return build_model({a, b});
  }();
  return m;
}

Response get(std::string path, std::vector<std::pair<std::string, std::string>> headers = {},
             std::string method = "GET", const HandlerOptions& options = {}) {
  Request r;
  r.method = std::move(method);
  r.path = std::move(path);
  r.headers = std::move(headers);
  return handle(r, model(), options);
}

std::string project_url(const std::string& target = "default") {
  return cat("/", target, "/simple/causal-conv1d/");
}

}  // namespace

TEST(IndexNegotiate, HonoursQValuesSpecificityAndPreferences) {
  auto fmt = [](std::string_view accept) -> std::string {
    auto n = negotiate(accept);
    return n ? n->content_type : "406";
  };
  EXPECT_EQ(fmt(kPip), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(fmt(""), "text/html; charset=utf-8");
  EXPECT_EQ(fmt("  "), "text/html; charset=utf-8");
  EXPECT_EQ(fmt("*/*"), "text/html; charset=utf-8");  // curl, browsers
  EXPECT_EQ(fmt("*"), "text/html; charset=utf-8");
  EXPECT_EQ(fmt("TEXT/HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.v1+html"), "application/vnd.pypi.simple.v1+html");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.latest+json"), "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.latest+html"), "application/vnd.pypi.simple.v1+html");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.v1+json;q=0.5, text/html;q=0.9"),
            "text/html; charset=utf-8");
  EXPECT_EQ(fmt("text/html;q=0.5, application/vnd.pypi.simple.v1+json;q=0.5"),
            "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(fmt("text/*;q=0.5, application/vnd.pypi.simple.v1+json;q=0.4"),
            "text/html; charset=utf-8");
  // The most specific range decides: */* allows everything except what is refused by name.
  EXPECT_EQ(fmt("*/*, application/vnd.pypi.simple.v1+json;q=0, text/html;q=0"),
            "application/vnd.pypi.simple.v1+html");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.v1+json;q=0.001"),
            "application/vnd.pypi.simple.v1+json");
  // Nothing acceptable.
  EXPECT_EQ(fmt("application/json"), "406");
  EXPECT_EQ(fmt("text/html;q=0"), "406");
  EXPECT_EQ(fmt("application/vnd.pypi.simple.v2+json"), "406");
  EXPECT_EQ(fmt("image/*"), "406");
  // Malformed ranges and q-values are ignored (RFC 9110): only the valid ones count.
  EXPECT_EQ(fmt("text/html;q=1.5, application/vnd.pypi.simple.v1+json;q=0.2"),
            "application/vnd.pypi.simple.v1+json");
  EXPECT_EQ(fmt("text/html;q=abc"), "406");
  EXPECT_EQ(fmt("garbage, text/html"), "text/html; charset=utf-8");
  EXPECT_EQ(fmt(";;;,,,/,*/html"), "406");
}

TEST(IndexHandler, ServesPagesInTheNegotiatedFormat) {
  Response html = get(project_url(), {{"Accept", "text/html"}});
  EXPECT_EQ(html.status, 200);
  EXPECT_EQ(html.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(html.header("Vary"), "Accept");
  EXPECT_NE(html.body.find(cat("href=\"", kCausalEscaped, "#sha256=")), std::string::npos);

  Response json = get(project_url(), {{"Accept", kPip}});
  EXPECT_EQ(json.status, 200);
  EXPECT_EQ(json.header("Content-Type"), "application/vnd.pypi.simple.v1+json");
  auto j = nlohmann::json::parse(json.body);
  EXPECT_EQ(j["files"][0]["url"], kCausalEscaped);
  EXPECT_NE(json.header("ETag"), html.header("ETag"));

  // Two Accept headers count as one list.
  Response two = get(project_url(), {{"Accept", "application/json"},
                                     {"accept", "application/vnd.pypi.simple.v1+json"}});
  EXPECT_EQ(two.header("Content-Type"), "application/vnd.pypi.simple.v1+json");

  Response refused = get(project_url(), {{"Accept", "application/json"}});
  EXPECT_EQ(refused.status, 406);
  EXPECT_NE(refused.body.find("application/vnd.pypi.simple.v1+json"), std::string::npos);

  Response list = get("/default/simple/", {{"Accept", "application/vnd.pypi.simple.v1+json"}});
  EXPECT_EQ(nlohmann::json::parse(list.body)["projects"][0]["name"], "causal-conv1d");
  Response root = get("/");
  EXPECT_EQ(root.status, 200);
  EXPECT_NE(root.body.find("<a href=\"default-sm90-sm120-ptx120/simple/\">"), std::string::npos);

  // Conditional: the ETag of the variant served; weak form accepted.
  EXPECT_EQ(get(project_url(), {{"Accept", kPip}, {"If-None-Match", json.header("ETag")}}).status,
            304);
  EXPECT_EQ(
      get(project_url(), {{"Accept", kPip}, {"If-None-Match", "W/" + json.header("ETag")}}).status,
      304);
  EXPECT_EQ(get(project_url(), {{"Accept", kPip}, {"If-None-Match", html.header("ETag")}}).status,
            200);
  Response not_modified =
      get(project_url(), {{"Accept", kPip}, {"If-None-Match", "\"x\", " + json.header("ETag")}});
  EXPECT_EQ(not_modified.status, 304);
  EXPECT_TRUE(not_modified.body.empty());
}

TEST(IndexHandler, RootListsTheTargetsAsJsonOnlyWhenAskedFor) {
  // What a declared target states, and a name that is no target name (left out).
  HandlerOptions o;
  o.routes.declared["default"] = {"2.11.0", "13.0", {"cp311", "cp312"}, {"sm_90"}};
  o.routes.declared["fresh"] = {"2.12.0", "13.0", {"cp311"}, {"sm_90", "sm_120+ptx"}};
  o.routes.declared["a b"] = {};
  Response html = get("/", {{"Accept", "*/*"}}, "GET", o);
  EXPECT_EQ(html.header("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(html.body, model().root_html);  // the page as it always was
  EXPECT_EQ(html.header("Vary"), "Accept");
  EXPECT_EQ(get("/", {{"Accept", "application/json"}}, "GET", o).body, model().root_html);

  Response json = get("/", {{"Accept", kPip}}, "GET", o);
  EXPECT_EQ(json.status, 200);
  EXPECT_EQ(json.header("Content-Type"), "application/vnd.pypi.simple.v1+json");
  EXPECT_NE(json.header("ETag"), html.header("ETag"));
  auto j = nlohmann::json::parse(json.body);
  EXPECT_EQ(j["meta"]["api-version"], "1.1");
  std::vector<std::string> names;
  for (const auto& t : j["targets"]) names.push_back(t["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"default", "default-sm90-sm120-ptx120", "fresh"}));
  const auto& d = j["targets"][0];
  EXPECT_EQ(d["url"], "default/simple/");
  EXPECT_EQ(d["torch"], "2.11.0");  // declared, not the label's 2.11
  EXPECT_EQ(d["cuda"], "13.0");
  EXPECT_EQ(d["python"], (std::vector<std::string>{"cp311", "cp312"}));
  EXPECT_EQ(d["archs"], std::vector<std::string>{"sm_90"});
  EXPECT_TRUE(d["declared"]);
  EXPECT_EQ(d["projects"][0]["name"], "causal-conv1d");
  EXPECT_EQ(d["projects"][0]["versions"], std::vector<std::string>{"1.7.0+cu130torch2.11"});
  EXPECT_EQ(d["projects"][0]["abi"], std::vector<std::string>{"cp311"});
  EXPECT_FALSE(d["projects"][0].contains("archs"));  // the entries state none
  // Known only from the cache: what its wheels' local labels say, no archs stated.
  const auto& o2 = j["targets"][1];
  EXPECT_EQ(o2["torch"], "2.11");
  EXPECT_EQ(o2["cuda"], "13.0");
  EXPECT_EQ(o2["python"], std::vector<std::string>{"cp311"});
  EXPECT_EQ(o2["archs"], std::vector<std::string>{});
  EXPECT_FALSE(o2["declared"]);
  // Declared without wheels yet: served empty, listed with what it declares.
  const auto& f = j["targets"][2];
  EXPECT_EQ(f["archs"], (std::vector<std::string>{"sm_90", "sm_120+ptx"}));
  EXPECT_EQ(f["projects"], nlohmann::json::array());
  EXPECT_EQ(get("/", {{"Accept", kPip}, {"If-None-Match", json.header("ETag")}}, "GET", o).status,
            304);
}

TEST(IndexModel, TargetsJsonTakesArchsEveryCompiledWheelHolds) {
  WheelEntry a;
  a.target = "t";
  a.key = "k1";
  a.filename = kCausal;
  a.sha256 = sha256_hex("wheel");
  a.metadata = testutil::metadata_text("causal-conv1d", "1.7.0+cu130torch2.11");
  a.archs = "sm_90;sm_120+ptx";
  WheelEntry b = a;
  b.key = "k2";
  b.filename = "causal_conv1d-1.7.0+cu130torch2.11-cp312-cp312-manylinux_2_34_x86_64.whl";
  b.sha256 = sha256_hex("wheel 2");
  b.archs = "sm_90;<b>";
  WheelEntry pure = a;
  pure.key = "k3";
  pure.filename = "fla_core-0.6.0-py3-none-any.whl";
  pure.metadata = testutil::metadata_text("fla-core", "0.6.0");
  pure.sha256 = sha256_hex("pure");
  pure.archs = "";
  auto j = nlohmann::json::parse(targets_json(build_model({a, b, pure}), {}));
  const auto& t = j["targets"][0];
  EXPECT_EQ(t["archs"], std::vector<std::string>{"sm_90"});
  EXPECT_EQ(t["python"], (std::vector<std::string>{"cp311", "cp312"}));
  EXPECT_EQ(t["torch"], "2.11");
  EXPECT_EQ(t["projects"][0]["archs"], std::vector<std::string>{"sm_90"});
  EXPECT_EQ(t["projects"][0]["abi"], (std::vector<std::string>{"cp311", "cp312"}));
  EXPECT_EQ(t["projects"][1]["name"], "fla-core");
  EXPECT_EQ(t["projects"][1]["abi"], std::vector<std::string>{"none"});
  EXPECT_FALSE(t["projects"][1].contains("archs"));
}

TEST(IndexHandler, RedirectsToNormalisedNamesAndTrailingSlashes) {
  auto location = [](const std::string& path) {
    Response r = get(path);
    EXPECT_EQ(r.status, 301) << path;
    return r.header("Location");
  };
  EXPECT_EQ(location("/default/simple"), "/default/simple/");
  EXPECT_EQ(location("/default"), "/default/simple/");
  EXPECT_EQ(location("/default/"), "/default/simple/");
  EXPECT_EQ(location("/default/simple/causal-conv1d"), "/default/simple/causal-conv1d/");
  EXPECT_EQ(location("/default/simple/Causal_Conv1D/"), "/default/simple/causal-conv1d/");
  EXPECT_EQ(location("/default/simple/causal.conv1d"),
            "/default/simple/causal-conv1d/");  // one hop
  EXPECT_EQ(location("/default/simple/Causal__Conv1d/x.whl"),
            "/default/simple/causal-conv1d/x.whl");
  EXPECT_EQ(location(cat("/default/simple/CAUSAL-conv1d/", kCausal)),
            cat("/default/simple/causal-conv1d/", kCausalEscaped));
  // Unknown names are not redirected.
  EXPECT_EQ(get("/default/simple/Unknown_Project/").status, 404);
  EXPECT_EQ(get("/default/simple/unknown").status, 404);
  EXPECT_EQ(get("/nosuch/simple/").status, 404);
  EXPECT_EQ(get("/nosuch").status, 404);
  EXPECT_EQ(get("/default/other/").status, 404);
  EXPECT_EQ(get("/favicon.ico").status, 404);
}

TEST(IndexHandler, ServesWheelsUnderBothSpellingsOfPlus) {
  for (const std::string& name :
       {std::string(kCausal), std::string(kCausalEscaped),
        std::string(
            "causal_conv1d-1.7.0%2bcu130torch2.11-cp311-cp311-manylinux_2_34_x86_64.whl")}) {
    Response r = get(project_url() + name);
    ASSERT_EQ(r.status, 200) << name;
    ASSERT_TRUE(r.file);
    EXPECT_EQ(r.file->dir, "/cache/wheels/k1");
    EXPECT_EQ(r.file->filename, kCausal);
    EXPECT_EQ(r.file->offset, 0u);
    EXPECT_EQ(r.file->length, 1000u);
    EXPECT_EQ(r.content_length(), 1000u);
    EXPECT_EQ(r.header("ETag"), cat('"', sha256_hex("wheel"), '"'));
    EXPECT_EQ(r.header("Accept-Ranges"), "bytes");
    EXPECT_EQ(r.header("Last-Modified"), "Mon, 30 Nov 2026 05:01:00 GMT");
  }
  // Each target serves its own build of the same file name.
  Response other = get(project_url("default-sm90-sm120-ptx120") + kCausalEscaped);
  ASSERT_TRUE(other.file);
  EXPECT_EQ(other.file->dir, "/cache/wheels/k2");
  // A trailing slash or a prefix of the name is not the file.
  EXPECT_EQ(get(project_url() + kCausal + "/").status, 404);
  EXPECT_EQ(get(project_url() + "causal_conv1d-1.7.0").status, 404);
  EXPECT_EQ(get(project_url() + ".metadata").status, 404);
}

TEST(IndexHandler, MetadataMatchesTheAdvertisedHash) {
  std::string md = testutil::metadata_text("causal-conv1d", "1.7.0+cu130torch2.11");
  Response r = get(project_url() + kCausalEscaped + ".metadata");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.body, md);
  auto page = nlohmann::json::parse(get(project_url(), {{"Accept", kPip}}).body);
  EXPECT_EQ(page["files"][0]["core-metadata"]["sha256"], sha256_hex(r.body));
  EXPECT_EQ(r.header("ETag"), cat('"', sha256_hex(md), '"'));
  Response part = get(project_url() + kCausal + ".metadata", {{"Range", "bytes=0-16"}});
  EXPECT_EQ(part.status, 206);
  EXPECT_EQ(part.body, "Metadata-Version:");
}

TEST(IndexHandler, AnAttestationIsServedBesideItsWheelAndOnlyThere) {
  const std::string signed_target = project_url("default-sm90-sm120-ptx120");
  Response r = get(signed_target + kCausalEscaped + ".intoto.jsonl");
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.file);
  EXPECT_EQ(r.body, "{\"payload\":\"\"}\n");
  EXPECT_EQ(r.header("Content-Type"), "application/jsonl");
  EXPECT_EQ(r.header("ETag"), cat('"', sha256_hex(r.body), '"'));
  EXPECT_EQ(
      get(signed_target + kCausalEscaped + ".intoto.jsonl", {{"If-None-Match", r.header("ETag")}})
          .status,
      304);
  // The unsigned build of the same file name has none; nor has a name that is no wheel's.
  EXPECT_EQ(get(project_url() + kCausalEscaped + ".intoto.jsonl").status, 404);
  EXPECT_EQ(get(signed_target + ".intoto.jsonl").status, 404);
  EXPECT_EQ(get(signed_target + "x.whl.intoto.jsonl").status, 404);
  // The pages do not change: pip and uv never see it.
  EXPECT_EQ(get(signed_target, {{"Accept", kPip}}).body.find("intoto"), std::string::npos);
}

TEST(IndexHandler, RangeHeadAndConditionalRequestsOnWheels) {
  std::string url = project_url() + kCausalEscaped;
  std::string etag = cat('"', sha256_hex("wheel"), '"');
  Response head = get(url, {}, "HEAD");
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.content_length(), 1000u);  // the server sends the headers of the GET
  EXPECT_EQ(head.header("ETag"), etag);

  Response first = get(url, {{"Range", "bytes=0-3"}});
  EXPECT_EQ(first.status, 206);
  EXPECT_EQ(first.header("Content-Range"), "bytes 0-3/1000");
  EXPECT_EQ(first.file->offset, 0u);
  EXPECT_EQ(first.file->length, 4u);
  Response tail = get(url, {{"Range", "bytes=-100"}});
  EXPECT_EQ(tail.header("Content-Range"), "bytes 900-999/1000");
  EXPECT_EQ(tail.file->offset, 900u);
  EXPECT_EQ(tail.file->length, 100u);
  Response open_ended = get(url, {{"Range", "bytes=990-"}});
  EXPECT_EQ(open_ended.header("Content-Range"), "bytes 990-999/1000");
  Response clamped = get(url, {{"Range", "bytes=500-99999"}});
  EXPECT_EQ(clamped.header("Content-Range"), "bytes 500-999/1000");
  Response beyond = get(url, {{"Range", "bytes=1000-"}});
  EXPECT_EQ(beyond.status, 416);
  EXPECT_EQ(beyond.header("Content-Range"), "bytes */1000");
  EXPECT_FALSE(beyond.file);
  // Several ranges, a malformed range and a stale If-Range all get the whole file.
  for (auto headers : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"Range", "bytes=0-1,5-6"}},
           {{"Range", "bytes=5-1"}},
           {{"Range", "lines=1-2"}},
           {{"Range", "bytes=0-1"}, {"If-Range", "\"stale\""}}}) {
    Response full = get(url, headers);
    EXPECT_EQ(full.status, 200);
    EXPECT_EQ(full.file->length, 1000u);
  }
  EXPECT_EQ(get(url, {{"Range", "bytes=0-1"}, {"If-Range", etag}}).status, 206);
  Response cached = get(url, {{"If-None-Match", etag}});
  EXPECT_EQ(cached.status, 304);
  EXPECT_FALSE(cached.file);
  EXPECT_EQ(get(url, {{"If-None-Match", "*"}}).status, 304);
}

TEST(IndexRange, ParsesSingleByteRanges) {
  ByteRange r;
  EXPECT_EQ(parse_range("bytes=0-0", 10, r), RangeResult::Partial);
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 0u);
  EXPECT_EQ(parse_range("bytes=-20", 10, r), RangeResult::Partial);  // more than the size: all
  EXPECT_EQ(r.first, 0u);
  EXPECT_EQ(r.last, 9u);
  EXPECT_EQ(parse_range("bytes=-0", 10, r), RangeResult::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=0-", 0, r), RangeResult::Unsatisfiable);
  EXPECT_EQ(parse_range("bytes=99999999999999999999-", 10, r),
            RangeResult::Full);  // overflow: ignored
  EXPECT_EQ(parse_range("bytes=a-b", 10, r), RangeResult::Full);
  EXPECT_EQ(parse_range("bytes=-", 10, r), RangeResult::Full);
  EXPECT_EQ(parse_range("bytes=+1-2", 10, r), RangeResult::Full);
  EXPECT_EQ(parse_range("", 10, r), RangeResult::Full);
}

TEST(IndexPath, SplitsAndRefusesHostileSegments) {
  bool slash = false;
  EXPECT_EQ(split_path("/", slash).value(), std::vector<std::string>{});
  EXPECT_TRUE(slash);
  EXPECT_EQ(split_path("/a/b%2Bc/", slash).value(), (std::vector<std::string>{"a", "b+c"}));
  EXPECT_TRUE(slash);
  EXPECT_EQ(split_path("/a/b+c", slash).value(), (std::vector<std::string>{"a", "b+c"}));
  EXPECT_FALSE(slash);
  for (const char* bad :
       {"", "a/b", "//a", "/a//b", "/..", "/a/../b", "/%2e%2e/x", "/%2E%2E", "/.", "/%2e", "/a%2fb",
        "/a%5cb", "/a\\b", "/a%00b", "/%", "/%4", "/%zz", "/a%0a", "/a\x01"}) {
    EXPECT_FALSE(split_path(bad, slash)) << bad;
  }
}

TEST(IndexHandler, TraversalAndMalformedRequestsNeverReachAFile) {
  const std::string attempts[] = {
      "/../etc/passwd",
      "/default/simple/../../etc/passwd",
      "/default/simple/%2e%2e/%2e%2e/etc/passwd",
      "/default/simple/causal-conv1d/..%2f..%2fentry.json",
      "/default/simple/causal-conv1d/%2e%2e%2f%2e%2e%2fk1%2fentry.json",
      "/default/simple/causal-conv1d/entry.json",
      "/default/simple/causal-conv1d/k1",
      "//etc/passwd",
      "/default//simple/causal-conv1d/",
      "/default/simple/causal-conv1d/..\\..\\entry.json",
      "/default/simple/causal-conv1d/%2Fetc%2Fpasswd",
      "/default/simple/causal-conv1d/x%00.whl",
      "/default/simple/causal-conv1d/%",
      "/default/simple/causal-conv1d/%zz",
      "etc/passwd",
      "http://127.0.0.1/default/simple/",
      "*",
      "/default/simple/causal-conv1d/./",
      "/wheels/k1/entry.json",
      "/default/simple/causal-conv1d/" + std::string(5000, 'a') + ".whl",
  };
  for (const std::string& path : attempts) {
    Response r = get(path);
    EXPECT_TRUE(r.status == 400 || r.status == 404) << path << " -> " << r.status;
    EXPECT_FALSE(r.file) << path;
  }
}

// RFC 9112: a second Content-Length could frame the body two ways (smuggling); HTTP/1.1 requires
// Host.
TEST(IndexHandler, AmbiguousRequestsAre400) {
  EXPECT_EQ(get("/", {{"Content-Length", "0"}, {"content-length", "5"}}).status, 400);
  EXPECT_EQ(get("/", {{"Content-Length", "0"}}).status, 200);
  Request r;
  r.method = "GET";
  r.path = "/";
  r.version = "HTTP/1.1";
  EXPECT_EQ(handle(r, model()).status, 400);
  r.headers = {{"host", "x"}};
  EXPECT_EQ(handle(r, model()).status, 200);
  r.headers.clear();
  r.version = "HTTP/1.0";
  EXPECT_EQ(handle(r, model()).status, 200);
}

TEST(IndexHandler, IsReadOnly) {
  for (const char* m : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "get"}) {
    Response r = get("/default/simple/", {}, m);
    EXPECT_EQ(r.status, 405) << m;
    EXPECT_EQ(r.header("Allow"), "GET, HEAD");
  }
}

TEST(IndexHandler, TokenGuardsEveryPath) {
  HandlerOptions opts;
  opts.token = "s3cret-token";
  auto basic = [](const std::string& user_pass) {
    std::string b64;
    const char* tbl = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::size_t i = 0;
    for (; i + 2 < user_pass.size(); i += 3) {
      unsigned v = (unsigned char)user_pass[i] << 16 | (unsigned char)user_pass[i + 1] << 8 |
                   (unsigned char)user_pass[i + 2];
      b64 += {tbl[v >> 18], tbl[(v >> 12) & 63], tbl[(v >> 6) & 63], tbl[v & 63]};
    }
    if (user_pass.size() - i == 1) {
      unsigned v = (unsigned char)user_pass[i] << 16;
      b64 += {tbl[v >> 18], tbl[(v >> 12) & 63], '=', '='};
    } else if (user_pass.size() - i == 2) {
      unsigned v = (unsigned char)user_pass[i] << 16 | (unsigned char)user_pass[i + 1] << 8;
      b64 += {tbl[v >> 18], tbl[(v >> 12) & 63], tbl[(v >> 6) & 63], '='};
    }
    return "Basic " + b64;
  };
  Response none = get("/default/simple/", {}, "GET", opts);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.header("WWW-Authenticate"), "Basic realm=\"kiln\"");
  EXPECT_EQ(get("/no/such/path", {}, "GET", opts).status, 401);  // no existence oracle
  EXPECT_EQ(get("/default/simple/", {{"Authorization", "Bearer s3cret-token"}}, "GET", opts).status,
            200);
  EXPECT_EQ(
      get("/default/simple/", {{"authorization", "bearer  s3cret-token "}}, "GET", opts).status,
      200);
  EXPECT_EQ(get("/default/simple/", {{"Authorization", "Bearer s3cret-tokeN"}}, "GET", opts).status,
            401);
  EXPECT_EQ(get("/default/simple/", {{"Authorization", "Bearer s3cret"}}, "GET", opts).status, 401);
  EXPECT_EQ(
      get("/default/simple/", {{"Authorization", basic("kiln:s3cret-token")}}, "GET", opts).status,
      200);
  EXPECT_EQ(
      get("/default/simple/", {{"Authorization", basic("s3cret-token:")}}, "GET", opts).status,
      200);
  EXPECT_EQ(get("/default/simple/", {{"Authorization", basic("kiln:wrong")}}, "GET", opts).status,
            401);
  EXPECT_EQ(get("/default/simple/", {{"Authorization", "Basic !!!"}}, "GET", opts).status, 401);
  EXPECT_EQ(get("/default/simple/", {{"Authorization", "s3cret-token"}}, "GET", opts).status, 401);
}

TEST(IndexHandle, SimpleWithoutATargetNamesEveryTargetsIndex) {
  for (const char* path : {"/simple/", "/simple", "/simple/causal-conv1d/"}) {
    Response r = get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body,
              "404 not found: kiln serves one index per target; give one of these as the index URL "
              "(--index-url):\n/default/simple/\n/default-sm90-sm120-ptx120/simple/\n")
        << path;
  }
  Request request;
  request.method = "GET";
  request.path = "/simple/";
  Response none = handle(request, build_model({}), {});
  EXPECT_EQ(none.status, 404);
  EXPECT_NE(none.body.find("(none yet: the cache holds no wheels)"), std::string::npos);
}

TEST(IndexHandler, ServesStaticFilesBesideTheTargets) {
  HandlerOptions o;
  o.static_files["doctor.py"] = make_static_file("text/x-python; charset=utf-8", "print('hi')\n");
  o.static_files["default"] = make_static_file("text/plain", "shadow?");
  Response r = get("/doctor.py", {}, "GET", o);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "print('hi')\n");
  EXPECT_EQ(r.header("Content-Type"), "text/x-python; charset=utf-8");
  EXPECT_EQ(r.header("ETag"), cat('"', sha256_hex("print('hi')\n"), '"'));
  EXPECT_FALSE(r.file.has_value());
  EXPECT_EQ(get("/doctor.py", {{"If-None-Match", r.header("ETag")}}, "GET", o).status, 304);
  EXPECT_EQ(get("/doctor.py", {}, "HEAD", o).status, 200);
  EXPECT_EQ(get("/doctor%2Epy", {}, "GET", o).body, r.body);  // the decoded segment is the name
  // Only the one segment, without a trailing slash; nothing else is found through it.
  EXPECT_EQ(get("/doctor.py/", {}, "GET", o).status, 404);
  EXPECT_EQ(get("/doctor.py/x", {}, "GET", o).status, 404);
  EXPECT_EQ(get("/default/doctor.py", {}, "GET", o).status, 404);
  EXPECT_EQ(get("/../doctor.py", {}, "GET", o).status, 400);
  EXPECT_EQ(get("/doctor.py", {}, "POST", o).status, 405);
  // Without it (index export, tests), the path is an unknown target.
  EXPECT_EQ(get("/doctor.py").status, 404);
  // A target's pages stay under /<target>/ whatever the static files are called.
  EXPECT_EQ(get("/default/simple/", {}, "GET", o).status, 200);
  // The token covers the static files too.
  o.token = "secret";
  EXPECT_EQ(get("/doctor.py", {}, "GET", o).status, 401);
  EXPECT_EQ(get("/doctor.py", {{"Authorization", "Bearer secret"}}, "GET", o).status, 200);
}

}  // namespace kiln::index

namespace kiln::index {

namespace {

HandlerOptions routed() {
  HandlerOptions o;
  o.routes.own = {"causal-conv1d", "fla-core", "kiln"};
  o.routes.fallback = "https://pypi.example/simple/";
  o.routes.targets["cu128"] = {"https://torch.example/whl/cu128/", {"torch", "nvidia-cublas-cu12"}};
  o.routes.targets["default"] = {};
  return o;
}

}  // namespace

TEST(IndexRoutes, KilnsOwnNamesAreAnsweredHereAndNeverRedirectedUpstream) {
  HandlerOptions o = routed();
  // A project with files: its page. kiln's name without files for a target: an empty page.
  EXPECT_EQ(get(project_url(), {{"Accept", kPip}}, "GET", o).status, 200);
  for (auto [path, name] : {std::pair{"/default/simple/fla-core/", "fla-core"},
                            {"/default/simple/kiln/", "kiln"},
                            {"/cu128/simple/causal-conv1d/", "causal-conv1d"},
                            {"/cu128/simple/fla-core/", "fla-core"}}) {
    Response r = get(path, {{"Accept", kPip}}, "GET", o);
    ASSERT_EQ(r.status, 200) << path;
    auto page = nlohmann::json::parse(r.body);
    EXPECT_TRUE(page["files"].empty()) << path;
    EXPECT_EQ(page["name"], name);
  }
  // A name of another target's project is kiln's too.
  o.routes.own.clear();
  EXPECT_EQ(get("/cu128/simple/causal-conv1d/", {}, "GET", o).status, 200);
  // Spellings of kiln's names are redirected within kiln, to the normalised name.
  Response r = get("/default/simple/Fla_Core", {}, "GET", routed());
  EXPECT_EQ(r.status, 301);
  EXPECT_EQ(r.header("Location"), "/default/simple/fla-core/");
  // A known target without wheels lists no projects.
  EXPECT_EQ(get("/cu128/simple/", {}, "GET", o).status, 200);
  EXPECT_EQ(get("/cu128/simple/", {}, "GET", {}).status, 404);
}

TEST(IndexRoutes, OtherNamesGoToTheirTargetsUpstreamForOneRequest) {
  auto location = [](const std::string& path, const HandlerOptions& o) {
    Response r = get(path, {}, "GET", o);
    EXPECT_EQ(r.status, 307) << path;
    EXPECT_EQ(r.header("Cache-Control"), "no-store") << path;
    return r.header("Location");
  };
  HandlerOptions o = routed();
  EXPECT_EQ(location("/default/simple/torch/", o), "https://pypi.example/simple/torch/");
  EXPECT_EQ(location("/default/simple/Typing_Extensions", o),
            "https://pypi.example/simple/typing-extensions/");  // one hop, normalised
  EXPECT_EQ(location("/cu128/simple/torch/", o), "https://torch.example/whl/cu128/torch/");
  EXPECT_EQ(location("/cu128/simple/NVIDIA_cublas.cu12/", o),
            "https://torch.example/whl/cu128/nvidia-cublas-cu12/");
  EXPECT_EQ(location("/cu128/simple/numpy/", o), "https://pypi.example/simple/numpy/");
  EXPECT_EQ(location("/default-sm90-sm120-ptx120/simple/numpy/", o),
            "https://pypi.example/simple/numpy/");
  // Only project names are sent anywhere: nothing a client chose beyond [a-z0-9-] reaches a
  // Location header.
  for (const std::string& path : std::vector<std::string>{
           "/default/simple/a%3Fb/", "/default/simple/a%23b/", "/default/simple/%C3%A9/",
           "/default/simple/a%20b/", "/default/simple/a%40evil.example/", "/default/simple/-x-/",
           "/default/simple/a:b/", cat("/default/simple/", std::string(201, 'a'), "/")})
    EXPECT_EQ(get(path, {}, "GET", o).status, 404) << path;
  EXPECT_EQ(location(cat("/default/simple/", std::string(200, 'a'), "/"), o),
            cat("https://pypi.example/simple/", std::string(200, 'a'), "/"));
  // A target whose torch index was refused sends its torch nowhere, never to the fallback.
  HandlerOptions refused = routed();
  refused.routes.targets["cu128"].url.clear();
  EXPECT_EQ(get("/cu128/simple/torch/", {}, "GET", refused).status, 404);
  EXPECT_EQ(location("/cu128/simple/numpy/", refused), "https://pypi.example/simple/numpy/");
  // Files are never redirected; unknown targets and --no-fallback are 404s.
  EXPECT_EQ(get("/default/simple/torch/torch-2.11.0-py3-none-any.whl", {}, "GET", o).status, 404);
  EXPECT_EQ(get("/nosuch/simple/torch/", {}, "GET", o).status, 404);
  o.routes.fallback.clear();
  EXPECT_EQ(get("/default/simple/torch/", {}, "GET", o).status, 404);
  EXPECT_EQ(location("/cu128/simple/torch/", o), "https://torch.example/whl/cu128/torch/");
  // The token is checked before any redirect, and never appears in one.
  o = routed();
  o.token = "s3cret";
  EXPECT_EQ(get("/default/simple/torch/", {}, "GET", o).status, 401);
  Response r = get("/default/simple/torch/", {{"Authorization", "Bearer s3cret"}}, "HEAD", o);
  EXPECT_EQ(r.status, 307);
  EXPECT_EQ(r.header("Location").find("s3cret"), std::string::npos);
}

TEST(IndexRoutes, UpstreamUrlsAreHttpWithoutCredentials) {
  EXPECT_EQ(check_upstream_url("https://pypi.org/simple").value(), "https://pypi.org/simple/");
  EXPECT_EQ(check_upstream_url("http://10.0.0.1:8080/root/pypi/+simple/").value(),
            "http://10.0.0.1:8080/root/pypi/+simple/");
  for (const char* bad :
       {"ftp://x/simple/", "file:///srv/simple/", "https://user:pw@x/simple/", "https://x@y/",
        "https://x/simple/?a=b", "https://x/simple/#f", "https:///simple/", "https://x/a b/",
        "https://x/\x1b[2J/", "pypi.org/simple"})
    EXPECT_FALSE(check_upstream_url(bad)) << bad;
  EXPECT_FALSE(check_upstream_url(cat("https://x/", std::string(3000, 'a'))));
}

}  // namespace kiln::index
