// Every fuzz target (tests/fuzz/fuzz_*.cpp, registered when built without libFuzzer) on every file
// of its corpus, tests/fuzz/corpus/<target>/: the seeds, and the crashers fuzzing found, which
// stay regression tests here in every build.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "fuzz.h"
#include "unit/source_dir.h"

namespace fs = std::filesystem;

namespace {

fs::path corpus_root() {
  return fs::path(kiln::test::source_dir()) / "tests" / "fuzz" / "corpus";
}

TEST(FuzzCorpus, EveryTargetHasACorpusAndEveryCorpusATarget) {
  std::set<std::string> targets, corpora;
  for (const auto& [name, fn] : kiln::fuzz::registry()) targets.insert(name);
  for (const auto& d : fs::directory_iterator(corpus_root()))
    corpora.insert(d.path().filename().string());
  EXPECT_EQ(targets, corpora);
  EXPECT_GE(targets.size(), 10u);
}

TEST(FuzzCorpus, EveryTargetRunsItsCorpus) {
  for (const auto& [name, fn] : kiln::fuzz::registry()) {
    std::size_t files = 0;
    for (const auto& f : fs::directory_iterator(corpus_root() / name)) {
      std::ifstream in(f.path(), std::ios::binary);
      std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      SCOPED_TRACE(f.path().string());
      EXPECT_EQ(fn(reinterpret_cast<const std::uint8_t*>(data.data()), data.size()), 0);
      ++files;
    }
    EXPECT_GE(files, 1u) << name;
  }
}

}  // namespace
