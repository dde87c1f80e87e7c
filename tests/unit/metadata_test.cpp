#include "wheel/metadata.h"

#include <gtest/gtest.h>

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
            "Metadata-Version: 2.1\nName: causal-conv1d\nVersion: 1.7.0+cu130torch2.11\nSummary: Causal conv\n"
            "License: BSD-3-Clause\nLicense-File: licenses/LICENSE\nRequires-Python: >=3.9\n"
            "Requires-Dist: torch==2.11.*\nRequires-Dist: einops\nRequires-Dist: triton>=3.3; extra == \"cuda\"\n"
            "Provides-Extra: cuda\nDescription-Content-Type: text/markdown\n\n# Title\nbody\n");
  auto parsed = parse_metadata(text);
  EXPECT_EQ(parsed.first("name"), "causal-conv1d");
  EXPECT_EQ(parsed.all("Requires-Dist").size(), 3u);
  EXPECT_EQ(parsed.body, "# Title\nbody\n");
}

TEST(Metadata, PinTorch) {
  EXPECT_EQ(pin_torch({"torch", "packaging"}, "2.11", true), (std::vector<std::string>{"torch==2.11.*", "packaging"}));
  EXPECT_EQ(pin_torch({"torch>=2.0", "einops"}, "2.11", false), (std::vector<std::string>{"torch==2.11.*", "einops"}));
  EXPECT_EQ(pin_torch({"einops"}, "2.11", true), (std::vector<std::string>{"torch==2.11.*", "einops"}));
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
            "Wheel-Version: 1.0\nGenerator: kiln 0.1.0\nRoot-Is-Purelib: false\nTag: cp311-cp311-manylinux_2_28_x86_64\n");
}

}  // namespace kiln::wheel
