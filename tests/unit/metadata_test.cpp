#include "wheel/metadata.h"

#include "core/fs.h"
#include "core/strings.h"
#include "wheel/upstream.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace kiln::wheel {

TEST(Metadata, RendersCoreMetadataWithExtras) {
  CoreMetadata m;
  m.name = "causal-conv1d";
  m.version = "1.7.0+cu130torch2.11";
  m.summary = "Causal conv";
  m.license_expression = "BSD-3-Clause";
  m.license_files = {"LICENSE"};
  m.classifiers = {"Programming Language :: Python :: 3"};
  m.project_urls = {"Homepage, https://example.org"};
  m.requires_python = ">=3.9";
  m.requires_dist = {"torch==2.11.*", "einops", "triton>=3.3; extra == \"cuda\""};
  m.provides_extra = {"test"};
  m.description = "# Title\nbody";
  m.description_content_type = "text/markdown";
  std::string text = m.render();
  EXPECT_EQ(text,
            "Metadata-Version: 2.4\nName: causal-conv1d\nVersion: 1.7.0+cu130torch2.11\nSummary: "
            "Causal conv\n"
            "License-Expression: BSD-3-Clause\nLicense-File: LICENSE\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Project-URL: Homepage, https://example.org\nRequires-Python: >=3.9\n"
            "Requires-Dist: torch==2.11.*\nRequires-Dist: einops\nRequires-Dist: triton>=3.3; "
            "extra == \"cuda\"\n"
            "Provides-Extra: test\nProvides-Extra: cuda\n"
            "Description-Content-Type: text/markdown\n\n# Title\nbody\n");
  auto parsed = parse_metadata(text);
  EXPECT_EQ(parsed.first("name"), "causal-conv1d");
  EXPECT_EQ(parsed.all("Requires-Dist").size(), 3u);
  EXPECT_EQ(parsed.body, "# Title\nbody\n");
}

// The extras were found with std::regex extra\s*==\s*["']([^"']+)["'] (sregex_iterator): the
// hand-written search finds the same ones, and a 1 MB extra name no longer overflows the stack.
TEST(Metadata, ExtrasAgreeWithTheRegularExpressionTheyReplaced) {
  const std::regex old(R"(extra\s*==\s*["']([^"']+)["'])");
  auto extras_of = [](const std::string& requirement) {
    CoreMetadata m;
    m.name = "a";
    m.version = "1";
    m.requires_dist = {requirement};
    std::set<std::string> out;
    std::string text = m.render();
    const std::string field = "\nProvides-Extra: ";
    for (auto at = text.find(field); at != std::string::npos; at = text.find(field, at + 1)) {
      auto start = at + field.size();
      out.insert(text.substr(start, text.find('\n', start) - start));
    }
    return out;
  };
  for (std::string r :
       {"a; extra == 'x'", "a; extra==\"x\"", "a; extra == 'x\"", "a; extra\t==\n'x'",
        "a; extra = 'x'", "a; extra == ''", "a; extra == 'x", "a; extra == x",
        "a; extra == 'x' or extra == \"y\"", "a; extraextra == 'x'", "a; extra == 'extra=='y''",
        "a; extra == \"extra == 'y'\" and extra == 'z'", "a; (extra == 'x y')",
        "extra=='a'extra=='b'", "a; extra == 'x' and python_version < '3.9'", "a; EXTRA == 'x'",
        "a; extra ==  'x'extra", ""}) {
    std::set<std::string> want;
    for (auto it = std::sregex_iterator(r.begin(), r.end(), old); it != std::sregex_iterator();
         ++it)
      want.insert((*it)[1].str());
    EXPECT_EQ(extras_of(r), want) << "'" << r << "'";
  }
  const std::string mb(1 << 20, 'x');
  EXPECT_EQ(extras_of("a; extra == '" + mb + "'"), std::set<std::string>{mb});
  EXPECT_EQ(extras_of("a; extra == '" + mb), std::set<std::string>{});
}

TEST(Metadata, PinTorch) {
  EXPECT_EQ(pin_torch({"torch", "packaging"}, "2.11", true),
            (std::vector<std::string>{"torch==2.11.*", "packaging"}));
  EXPECT_EQ(pin_torch({"torch>=2.0", "einops"}, "2.11", false),
            (std::vector<std::string>{"torch==2.11.*", "einops"}));
  EXPECT_EQ(pin_torch({"einops"}, "2.11", true),
            (std::vector<std::string>{"torch==2.11.*", "einops"}));
  EXPECT_EQ(pin_torch({"einops"}, "2.11", false), (std::vector<std::string>{"einops"}));
  // A torch requirement behind an extra is left to the extra.
  EXPECT_EQ(pin_torch({"torch>=2.7; extra == 'cuda'"}, "2.11", false),
            (std::vector<std::string>{"torch>=2.7; extra == 'cuda'"}));
}

TEST(Metadata, RecordAndWheelFile) {
  EXPECT_EQ(record_hash(""), "sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
  EXPECT_EQ(render_record({{"a/b.py", "sha256=x", "3"}, {"x,y", "", ""}, {"d/RECORD", "", ""}}),
            "a/b.py,sha256=x,3\n\"x,y\",,\nd/RECORD,,\n");
  EXPECT_EQ(render_wheel_file("kiln 0.1.0", false, "cp311-cp311-manylinux_2_28_x86_64"),
            "Wheel-Version: 1.0\nGenerator: kiln 0.1.0\nRoot-Is-Purelib: false\nTag: "
            "cp311-cp311-manylinux_2_28_x86_64\n");
}

// A PKG-INFO like flash-linear-attention's: what the wheel keeps and what it may add.
const char* kPkgInfo =
    "Metadata-Version: 2.4\nName: demo\nVersion: 1.0\nLicense: MIT License\n        \n"
    "        Copyright\nClassifier: License :: OSI Approved :: MIT License\n"
    "Classifier: Programming Language :: Python :: 3\nProject-URL: Homepage, https://x\n"
    "Requires-Dist: torch\nRequires-Dist: transformers<6,>=5.6.2\nProvides-Extra: cuda\n"
    "Requires-Dist: triton>=3.3; extra == \"cuda\"\nProvides-Extra: test\n"
    "Requires-Dist: pytest; extra == \"test\"\n\nREADME\n";

TEST(Upstream, ReadsAndKeepsTheSdistsMetadata) {
  auto dir = TempDir::create(fs::temp_directory_path(), "upstream-").value();
  ASSERT_TRUE(write_file_atomic(dir.path() / "PKG-INFO", kPkgInfo));
  fs::create_directories(dir.path() / "demo.egg-info");
  ASSERT_TRUE(write_file_atomic(dir.path() / "demo.egg-info" / "entry_points.txt",
                                "[console_scripts]\ndemo = demo:main\n"));
  UpstreamMetadata up = read_upstream_metadata(dir.path()).value();
  EXPECT_EQ(up.origin, "PKG-INFO");
  EXPECT_EQ(up.provides_extra, (std::vector<std::string>{"cuda", "test"}));
  EXPECT_EQ(up.entry_points, "[console_scripts]\ndemo = demo:main\n");

  CoreMetadata md;
  md.license_expression = "MIT";
  apply_upstream(up, {"packaging", "transformers<6, >=5.6.2"}, md);
  EXPECT_EQ(md.requires_dist, (std::vector<std::string>{"torch", "transformers<6,>=5.6.2",
                                                        "triton>=3.3; extra == \"cuda\"",
                                                        "pytest; extra == \"test\"", "packaging"}));
  EXPECT_EQ(md.classifiers, (std::vector<std::string>{"Programming Language :: Python :: 3"}));
  EXPECT_EQ(md.project_urls, (std::vector<std::string>{"Homepage, https://x"}));

  // What kiln writes compares equal: the torch pin and the added requirement are allowed.
  md.name = "demo";
  md.version = "1.0";
  md.requires_dist = pin_torch(md.requires_dist, "2.11", true);
  ParsedMetadata wheel_md = parse_metadata(md.render());
  EXPECT_EQ(upstream_differences(wheel_md, up, {"packaging"}, "torch==2.11.*"),
            std::vector<std::string>{});
  // A dropped requirement (and with it an extra) and a requirement of nobody's are reported;
  // spaces inside a requirement do not count.
  md.requires_dist = {"torch==2.11.*", "transformers <6, >=5.6.2", "triton>=3.3; extra == \"cuda\"",
                      "banana", "packaging"};
  md.provides_extra = {"cuda"};
  auto diff = upstream_differences(parse_metadata(md.render()), up, {"packaging"}, "torch==2.11.*");
  EXPECT_EQ(diff, (std::vector<std::string>{
                      "Requires-Dist 'pytest; extra == \"test\"' of the sdist is missing",
                      "Requires-Dist 'banana' is not the sdist's",
                      "Provides-Extra 'test' of the sdist is missing"}))
      << join(diff, "\n");
}

TEST(Upstream, TreeWithoutPkgInfoOrWithALinkHasNone) {
  auto dir = TempDir::create(fs::temp_directory_path(), "upstream-").value();
  EXPECT_EQ(read_upstream_metadata(dir.path()).value().origin, "");
  fs::create_symlink("/etc/passwd", dir.path() / "PKG-INFO");
  EXPECT_EQ(read_upstream_metadata(dir.path()).value().origin, "");
}

}  // namespace kiln::wheel
