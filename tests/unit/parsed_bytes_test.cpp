#include "compile/parsed_bytes.h"

#include <gtest/gtest.h>

#include <optional>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::compile {
namespace {

using Names = std::vector<std::string>;

TEST(ParsedBytes, QuotedIncludesAreTheQuotedFormOnly) {
  const std::string text =
      "#include \"a.h\"\n"
      "  #  include   \"sub/b.cuh\"  // trailing\n"
      "#include <torch/extension.h>\n"
      "#include_next \"next.h\"\n"
      "#include \"\"\n"
      "#include \"unterminated.h\n"
      "// #include \"commented.h\"\n"
      "#define X \"#include \\\"in_a_string.h\\\"\"\n"
      "#include \"last.h\"";  // no final newline
  EXPECT_EQ(quoted_includes(text, 100), (Names{"a.h", "sub/b.cuh", "last.h"}));
  EXPECT_EQ(quoted_includes(text, 1), (Names{"a.h"}));
  EXPECT_EQ(quoted_includes("", 100), Names{});
}

class ParsedBytesTree : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-parsed-").value());
    top_ = dir_->path() / "src";
  }
  void write(const std::string& rel, const std::string& text) {
    write_file_atomic(dir_->path() / rel, text).value();
  }
  std::optional<TempDir> dir_;
  fs::path top_;
};

TEST_F(ParsedBytesTree, ASourceCountsItselfAndTheTreesHeadersItIncludesOnce) {
  const std::string unit = "#include \"kernel.cuh\"\n#include \"common.h\"\n#include <cuda.h>\n";
  const std::string kernel =
      "#include \"common.h\"\n#include \"kernel.cuh\"\n" + std::string(5000, 'k');
  const std::string common = "#pragma once\n" + std::string(700, 'c');
  write("src/csrc/unit.cu", unit);
  write("src/csrc/include/kernel.cuh", kernel);  // found through the include directory
  write("src/csrc/common.h", common);            // beside the including file
  write("src/csrc/unused.h", std::string(9000, 'u'));
  EXPECT_EQ(parsed_bytes(top_, "csrc/unit.cu", {"csrc/include"}),
            static_cast<double>(unit.size() + kernel.size() + common.size()));
  // Without the include directory, kernel.cuh is not found.
  EXPECT_EQ(parsed_bytes(top_, "csrc/unit.cu", {}),
            static_cast<double>(unit.size() + common.size()));
  EXPECT_EQ(parsed_bytes(top_, "csrc/missing.cu", {}), 0);
  EXPECT_EQ(parsed_bytes(dir_->path() / "nothing", "x.cu", {}), 0);
}

TEST_F(ParsedBytesTree, NothingOutsideTheTreeIsReadWhateverTheNamesAndLinksSay) {
  const std::string secret(100000, 's');
  write("secret.h", secret);  // beside the tree, not in it
  const std::string unit = "#include \"../secret.h\"\n#include \"" +
                           (dir_->path() / "secret.h").string() +
                           "\"\n#include \"up.h\"\n#include \"dir.h\"\n";
  write("src/unit.cu", unit);
  fs::create_symlink(dir_->path() / "secret.h", top_ / "up.h");  // a link that leaves the tree
  fs::create_directories(top_ / "dir.h");                        // not a regular file
  EXPECT_EQ(parsed_bytes(top_, "unit.cu", {"..", "/"}), static_cast<double>(unit.size()));
  // A source that is itself a link out of the tree counts nothing.
  fs::create_symlink(dir_->path() / "secret.h", top_ / "linked.cu");
  EXPECT_EQ(parsed_bytes(top_, "linked.cu", {}), 0);
}

TEST_F(ParsedBytesTree, AnEndlessTreeIsReadToItsBoundsOnly) {
  // 600 headers, each including the next and 300 names that exist: 512 files are read.
  const std::string pad(100, 'p');
  std::string many;
  for (int i = 0; i < 300; ++i) many += cat("#include \"h", i, ".h\"\n");
  for (int i = 0; i < 600; ++i)
    write(cat("src/h", i, ".h"), cat("#include \"h", i + 1, ".h\"\n", pad));
  write("src/unit.cu", many);
  const double bytes = parsed_bytes(top_, "unit.cu", {});
  const double header = static_cast<double>(cat("#include \"h10.h\"\n", pad).size());
  EXPECT_GT(bytes, 400 * header);
  EXPECT_LT(bytes, static_cast<double>(many.size()) + 512 * (header + 2));
  // A file over 4 MiB is not read.
  write("src/huge.cu", std::string((4u << 20) + 1, 'x'));
  EXPECT_EQ(parsed_bytes(top_, "huge.cu", {}), 0);
}

}  // namespace
}  // namespace kiln::compile
