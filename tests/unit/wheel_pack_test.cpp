#include "wheel/pack.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "wheel/metadata.h"
#include "wheel/reader.h"

namespace kiln::wheel {
namespace {

namespace fs = std::filesystem;

class PackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-pack-test-").value());
  }
  fs::path root() const { return tmp_->path(); }
  void put(const fs::path& dir, const std::string& rel, const std::string& data, int mode = 0644) {
    fs::create_directories((dir / rel).parent_path());
    std::ofstream(dir / rel, std::ios::binary) << data;
    ::chmod((dir / rel).c_str(), mode);
  }
  // The contents of a small binary-carrying wheel, as scripts/package lays them out.
  fs::path tree(const std::string& name,
                const std::string& wheel_tags = "Tag: py3-none-manylinux_2_28_x86_64\n") {
    fs::path dir = root() / name;
    put(dir, "tool-1.0+g12.dist-info/METADATA",
        "Metadata-Version: 2.1\nName: tool\nVersion: 1.0+g12\n");
    put(dir, "tool-1.0+g12.dist-info/WHEEL",
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n" + wheel_tags);
    put(dir, "tool-1.0+g12.data/scripts/tool",
        std::string("\x7f"
                    "ELF binary",
                    10),
        0755);
    put(dir, "tool/__init__.py", "");
    return dir;
  }
  std::optional<TempDir> tmp_;
};

TEST_F(PackTest, WritesSortedEntriesWithRecordAndTheExecBit) {
  fs::path dir = tree("a");
  put(dir, "tool-1.0+g12.dist-info/RECORD", "stale,,\n");
  fs::path wheel = pack_wheel(dir, root()).value();
  EXPECT_EQ(wheel.filename(), "tool-1.0+g12-py3-none-manylinux_2_28_x86_64.whl");
  auto entries = read_wheel_files(wheel).value();
  std::vector<std::string> paths;
  for (const auto& e : entries) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"tool-1.0+g12.data/scripts/tool", "tool/__init__.py",
                                             "tool-1.0+g12.dist-info/METADATA",
                                             "tool-1.0+g12.dist-info/WHEEL",
                                             "tool-1.0+g12.dist-info/RECORD"}));
  EXPECT_TRUE(entries[0].executable);
  EXPECT_FALSE(entries[1].executable);
  const std::string& record = entries.back().data;
  EXPECT_NE(
      record.find(cat("tool-1.0+g12.data/scripts/tool,", record_hash(entries[0].data), ",10\n")),
      std::string::npos)
      << record;
  EXPECT_EQ(record.find("stale"), std::string::npos);
  EXPECT_NE(record.find("tool-1.0+g12.dist-info/RECORD,,\n"), std::string::npos);
}

TEST_F(PackTest, SameContentsGiveTheSameBytesWhateverTheirPathAndTimes) {
  fs::path a = tree("a"), b = tree("elsewhere/b");
  fs::last_write_time(b / "tool/__init__.py",
                      fs::file_time_type::clock::now() - std::chrono::hours(100));
  fs::create_directories(root() / "out-a");
  fs::create_directories(root() / "out-b");
  auto wa = pack_wheel(a, root() / "out-a").value(), wb = pack_wheel(b, root() / "out-b").value();
  EXPECT_EQ(sha256_file(wa).value(), sha256_file(wb).value());
}

TEST_F(PackTest, CompressesSeveralTagLinesIntoOneTagSet) {
  fs::path dir =
      tree("a", "Tag: py3-none-manylinux_2_28_x86_64\nTag: py3-none-manylinux_2_17_x86_64\n");
  EXPECT_EQ(pack_wheel(dir, root()).value().filename(),
            "tool-1.0+g12-py3-none-manylinux_2_28_x86_64.manylinux_2_17_x86_64.whl");
  fs::path odd = tree("b", "Tag: py3-none-linux_x86_64\nTag: cp312-abi3-manylinux_2_28_x86_64\n");
  auto r = pack_wheel(odd, root());
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not one compressed tag set"), std::string::npos);
}

TEST_F(PackTest, RefusesWhatIsNotAWheelTree) {
  auto message = [&](const fs::path& dir) {
    auto r = pack_wheel(dir, root());
    return r ? std::string("packed") : r.error().message;
  };
  fs::path two = tree("two");
  put(two, "other-2.0.dist-info/METADATA", "Name: other\nVersion: 2.0\n");
  EXPECT_NE(message(two).find("exactly one"), std::string::npos);

  fs::path named = tree("named");
  put(named, "tool-1.0+g12.dist-info/METADATA",
      "Metadata-Version: 2.1\nName: tool\nVersion: 1.1\n");
  EXPECT_NE(message(named).find("do not match"), std::string::npos);

  fs::path untagged = tree("untagged", "");
  EXPECT_NE(message(untagged).find("no Tag line"), std::string::npos);
  fs::path bad_tag = tree("bad-tag", "Tag: py3-none/../x-any\n");
  EXPECT_NE(message(bad_tag).find("not interpreter-abi-platform"), std::string::npos);

  fs::path linked = tree("linked");
  fs::create_symlink("/etc/passwd", linked / "tool/passwd");
  EXPECT_NE(message(linked).find("links are refused"), std::string::npos);

  fs::path no_wheel = tree("no-wheel");
  fs::remove(no_wheel / "tool-1.0+g12.dist-info/WHEEL");
  EXPECT_NE(message(no_wheel).find("WHEEL: missing"), std::string::npos);

  // A version kiln's own validate, pip and uv would refuse in the file name is refused here: not
  // PEP 440, or not its normalised form (the name a wheel's file must carry).
  int n = 0;
  for (const auto& [version, why] : std::vector<std::pair<std::string, std::string>>{
           {"1 0", "is not a normalised PEP 440 version"},
           {"1$(id)", "is not a normalised PEP 440 version"},
           {"..", "is not a normalised PEP 440 version"},
           {"1.0.0-rc1", "not <name>-<version>.dist-info"},
           {"1.0RC1", "is not a normalised PEP 440 version (write 1.0rc1)"},
           {"v1.0", "(write 1.0)"}}) {
    fs::path dir = root() / cat("v", n++);
    put(dir, cat("tool-", version, ".dist-info/METADATA"),
        cat("Metadata-Version: 2.1\nName: tool\nVersion: ", version, "\n"));
    put(dir, cat("tool-", version, ".dist-info/WHEEL"),
        "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n");
    EXPECT_NE(message(dir).find(why), std::string::npos) << version << ": " << message(dir);
  }
  fs::path bad_name = root() / "bad-name";
  put(bad_name, "_tool-1.0.dist-info/METADATA",
      "Metadata-Version: 2.1\nName: _tool\nVersion: 1.0\n");
  EXPECT_NE(message(bad_name).find("not <name>-<version>.dist-info"), std::string::npos);
  // Nothing was written for any of them.
  for (const auto& e : fs::directory_iterator(root())) EXPECT_NE(e.path().extension(), ".whl");
}

}  // namespace
}  // namespace kiln::wheel
