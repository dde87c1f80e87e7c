#include "rebuild/compare.h"

#include <gtest/gtest.h>

#include "archive/zip_writer.h"
#include "core/fs.h"
#include "elf/elf.h"

namespace kiln::rebuild {

namespace {

// A real shared object of this machine.
std::string some_elf() {
  for (const char* path :
       {"/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"})
    if (auto bytes = read_file(path)) return *bytes;
  ADD_FAILURE() << "no libz.so.1 here";
  return {};
}

fs::path zip(const fs::path& path,
             const std::vector<std::pair<std::string, std::string>>& members) {
  auto w = archive::ZipWriter::create(path).value();
  for (const auto& [name, data] : members) w.add(name, data).value();
  w.finish().value();
  return path;
}

}  // namespace

TEST(RebuildCompare, NamesTheMembersAndTheElfSectionsThatDiffer) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-compare-").value();
  std::string so = some_elf();
  auto info = elf::read_elf(so, "libz.so.1").value();
  const elf::Section* text = info.section(".text");
  ASSERT_TRUE(text && text->size > 16);
  std::string changed = so;
  changed[text->offset + 8] ^= 0x01;  // one byte of its code

  fs::path a = zip(dir.path() / "a.whl", {{"pkg/m.so", so}, {"pkg/a.py", "a"}, {"RECORD", "1"}});
  fs::path same =
      zip(dir.path() / "same.whl", {{"pkg/m.so", so}, {"pkg/a.py", "a"}, {"RECORD", "1"}});
  fs::path b =
      zip(dir.path() / "b.whl", {{"pkg/m.so", changed}, {"pkg/new.py", "n"}, {"RECORD", "2"}});

  Comparison equal = compare_wheels(a, same).value();
  EXPECT_TRUE(equal.same);
  EXPECT_EQ(equal.sha256, equal.rebuilt_sha256);
  EXPECT_TRUE(summary(equal).empty());

  Comparison c = compare_wheels(a, b).value();
  EXPECT_FALSE(c.same);
  ASSERT_EQ(c.members.size(), 4u);
  EXPECT_EQ(c.members[0].member, "pkg/m.so");
  EXPECT_EQ(c.members[0].sections, std::vector<std::string>{".text"});
  EXPECT_EQ(summary(c), (std::vector<std::string>{
                            "pkg/m.so: contents differ in .text", "pkg/a.py: only in the wheel",
                            "RECORD: contents differ", "pkg/new.py: only in the rebuild"}));
  EXPECT_EQ(summary(c, 2).back(), "… and 2 more");
}

TEST(RebuildCompare, SameMembersInAnotherOrderIsAStructuralDifference) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-compare-").value();
  fs::path a = zip(dir.path() / "a.whl", {{"x", "1"}, {"y", "2"}});
  fs::path b = zip(dir.path() / "b.whl", {{"y", "2"}, {"x", "1"}});
  Comparison c = compare_wheels(a, b).value();
  EXPECT_FALSE(c.same);
  EXPECT_TRUE(c.members.empty());
  EXPECT_EQ(summary(c).size(), 1u);
  EXPECT_NE(summary(c)[0].find("zip's structure differs"), std::string::npos);
  // Not a zip: an error naming it, not a crash.
  write_file_atomic(dir.path() / "bad.whl", "not a zip").value();
  EXPECT_FALSE(compare_wheels(a, dir.path() / "bad.whl"));
}

}  // namespace kiln::rebuild
