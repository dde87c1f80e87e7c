#include "wheel/metadata.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace kiln::wheel {

TEST(Metadata, RendersCoreMetadataWithExtras) {
  CoreMetadata m;
  m.name = "causal-conv1d";
  m.version = "1.7.0+cu130torch2.11";
  m.summary = "Causal conv";
  m.license = "BSD-3-Clause";
  m.license_files = {"licenses/LICENSE"};
  m.requires_python = ">=3.9";
  m.requires_dist = {"torch==2.11.*", "einops", "triton>=3.3; extra == \"cuda\""};
  m.description = "# Title\nbody";
  m.description_content_type = "text/markdown";
  std::string text = m.render();
  EXPECT_EQ(text,
            "Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 1.7.0+cu130torch2.11\nSummary: "
            "Causal conv\n"
            "License: BSD-3-Clause\nLicense-File: licenses/LICENSE\nRequires-Python: >=3.9\n"
            "Requires-Dist: torch==2.11.*\nRequires-Dist: einops\nRequires-Dist: triton>=3.3; "
            "extra == \"cuda\"\n"
            "Provides-Extra: cuda\nDescription-Content-Type: text/markdown\n\n# Title\nbody\n");
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

}  // namespace kiln::wheel
