// Unified diffs: the strict parser on any text, and a series that parses applied to a small tree:
// all or nothing, and nothing written outside the tree.
#include <fstream>
#include <set>

#include "fuzz.h"
#include "patch/patch.h"

namespace fs = std::filesystem;
using kiln::fuzz::fail;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// The tree the patches apply to: the shapes the seed patches touch.
void make_tree(const fs::path& tree) {
  std::error_code ec;
  fs::remove_all(tree, ec);
  write(tree / "setup.py",
        "import os\n\nVERSION = '1.0'\n\nsetup(\n    name='demo',\n    version=VERSION,\n)\n");
  write(tree / "a.txt", "one\ntwo\nthree\nfour\nfive\n");
  write(tree / "dir" / "b.txt", "alpha\r\nbeta\r\ngamma\r\n");
  write(tree / "c.txt", "no newline at end");
}

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

}  // namespace

KILN_FUZZ_TARGET(patch) {
  std::string_view text = kiln::fuzz::text(data, size);
  auto parsed = kiln::patch::parse(text, "fuzz.patch");
  if (!parsed) {
    if (parsed.error().message.rfind("patch fuzz.patch", 0) != 0)
      fail("an error that does not name the patch");
    return 0;
  }
  for (const auto& f : *parsed) {
    for (const auto* p : {&f.old_path, &f.new_path}) {
      if (p->empty()) continue;
      fs::path normal = fs::path(*p).lexically_normal();
      if (p->front() == '/' || (!normal.empty() && *normal.begin() == ".."))
        fail("a parsed path leaves the tree: " + *p);
    }
    for (const auto& h : f.hunks) {
      int old_lines = 0, new_lines = 0;
      for (const auto& line : h.lines) {
        if (line.empty()) fail("an empty hunk line");
        old_lines += line[0] != '+';
        new_lines += line[0] != '-';
      }
      if (old_lines != h.old_count || new_lines != h.new_count)
        fail("a hunk whose lines disagree with its header");
    }
  }
  const fs::path box = kiln::fuzz::sandbox("patch");
  fs::path tree = box / "tree";
  make_tree(tree);
  auto applied = kiln::patch::apply_series(tree, {{"fuzz.patch", std::string(text)}});
  if (names_in(box) != std::set<std::string>{"tree"})
    fail("something was written outside the tree");
  if (!applied && applied.error().message.empty()) fail("an error without a message");
  return 0;
}
