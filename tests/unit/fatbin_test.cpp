#include "fatbin/fatbin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <regex>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "elf/elf.h"
#include "unit/source_dir.h"

namespace kiln::fatbin {
namespace {

// Fixtures made by tests/data/fatbin/regenerate.sh (nvcc 13.0) from kernel.cu.
fs::path fixture(const std::string& name) {
  return fs::path(kiln::test::source_dir()) / "tests/data/fatbin" / name;
}

std::string load(const std::string& name) {
  return read_file(fixture(name)).value();
}

// "elf sm_90 1.8 none" per entry.
std::vector<std::string> describe(const std::vector<Entry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries)
    out.push_back(cat(kind_name(e.kind), " ", e.code_name(), " ", e.version_major, ".",
                      e.version_minor, " ", compression_name(e.compression)));
  return out;
}

TEST(Fatbin, ListsSassAndPtxOfSeveralArchs) {
  std::string bytes = load("multi.fatbin");
  auto containers = parse(bytes, "multi.fatbin").value();
  ASSERT_EQ(containers.size(), 1u);
  EXPECT_EQ(containers[0].offset, 0u);
  EXPECT_EQ(containers[0].size, bytes.size());
  EXPECT_EQ(describe(containers[0].entries),
            (std::vector<std::string>{"elf sm_90 1.8 none", "ptx compute_120 9.0 zstd",
                                      "elf sm_120 1.8 none"}));
  const Entry& ptx = containers[0].entries[1];
  EXPECT_EQ(ptx.arch_name(), "sm_120");
  EXPECT_GT(ptx.uncompressed_size, ptx.compressed_size);
  EXPECT_FALSE(ptx.debug());
}

TEST(Fatbin, KeepsArchAndFamilyVariants) {
  auto entries = all_entries(parse(load("variants.fatbin"), "variants.fatbin").value());
  EXPECT_EQ(describe(entries),
            (std::vector<std::string>{"elf sm_90a 1.8 none", "elf sm_100f 1.8 none",
                                      "ptx compute_100a 9.0 zstd", "ptx compute_120f 9.0 zstd",
                                      "ptx compute_75 9.0 zstd"}));
}

TEST(Fatbin, DecompressesLzAndZstdToTheSameCubin) {
  std::string plain = load("plain.fatbin"), lz = load("lz.fatbin"), zstd = load("zstd.fatbin");
  auto p = all_entries(parse(plain, "plain").value());
  auto l = all_entries(parse(lz, "lz").value());
  auto z = all_entries(parse(zstd, "zstd").value());
  EXPECT_EQ(describe(p),
            (std::vector<std::string>{"ptx compute_90 9.0 none", "elf sm_90 1.8 none"}));
  EXPECT_EQ(describe(l), (std::vector<std::string>{"ptx compute_90 9.0 lz", "elf sm_90 1.8 lz"}));
  EXPECT_EQ(describe(z),
            (std::vector<std::string>{"ptx compute_90 9.0 zstd", "elf sm_90 1.8 zstd"}));
  std::string cubin = payload(plain, p[1]).value();
  EXPECT_EQ(cubin_arch(cubin).value(), 90);
  EXPECT_EQ(payload(lz, l[1]).value(), cubin);
  EXPECT_EQ(payload(zstd, z[1]).value(), cubin);
  std::string ptx = payload(plain, p[0]).value();
  EXPECT_NE(ptx.find(".target sm_90"), std::string::npos);
  EXPECT_EQ(payload(lz, l[0]).value(), ptx);
  EXPECT_EQ(payload(zstd, z[0]).value(), ptx);
  // The cubins of other archs say so in their own ELF headers.
  std::string multi = load("multi.fatbin");
  auto m = all_entries(parse(multi, "multi").value());
  EXPECT_EQ(cubin_arch(payload(multi, m[2]).value()).value(), 120);
  EXPECT_FALSE(cubin_arch(ptx));
}

TEST(Fatbin, ReadsTheSectionOfAHostObject) {
  std::string image = load("kernel.o");
  auto info = elf::read_elf(image, "kernel.o").value();
  const elf::Section* s = info.section(".nv_fatbin");
  ASSERT_NE(s, nullptr);
  auto bytes = elf::section_bytes(image, *s);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(describe(all_entries(parse(*bytes, "kernel.o").value())),
            (std::vector<std::string>{"elf sm_90 1.8 none", "ptx compute_120 9.0 zstd"}));
}

TEST(Fatbin, ReadsSeveralContainersWithAlignmentPadding) {
  std::string plain = load("plain.fatbin");
  ASSERT_EQ(plain.size() % 8, 0u);
  std::string two = plain + std::string(8, '\0') + load("multi.fatbin") + std::string(5, '\0');
  auto containers = parse(two, "two").value();
  ASSERT_EQ(containers.size(), 2u);
  EXPECT_EQ(containers[1].offset, plain.size() + 8);
  EXPECT_EQ(all_entries(containers).size(), 5u);
  // Padding that does not lead to an aligned container is not padding.
  auto bad = parse(plain + std::string(3, '\0') + load("multi.fatbin"), "bad");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("unexpected bytes at offset"), std::string::npos)
      << bad.error().message;
}

TEST(Fatbin, RejectsDamagedHeaders) {
  std::string multi = load("multi.fatbin");
  std::string b = multi;
  b[0] = 'X';
  auto r = parse(b, "m");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("bad magic"), std::string::npos);
  // The container claims more bytes than there are.
  r = parse(multi.substr(0, multi.size() - 8), "m");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("claims"), std::string::npos) << r.error().message;
  // An entry payload running past its container.
  b = multi;
  b[16 + 8 + 4] = '\x7f';  // payload size of the first entry: huge
  r = parse(b, "m");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("runs past its container"), std::string::npos)
      << r.error().message;
  // A zstd entry whose payload is not zstd.
  b = multi;
  auto entries = all_entries(parse(multi, "m").value());
  b[entries[1].offset + entries[1].header_size] ^= 0x55;
  r = parse(b, "m");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("lacks the zstd magic"), std::string::npos);
  EXPECT_EQ(parse("", "empty").value().size(), 0u);
}

TEST(Fatbin, SurvivesRandomDamage) {
  std::string lz = load("lz.fatbin"), multi = load("multi.fatbin");
  std::mt19937 rng(5);
  for (int round = 0; round < 4000; ++round) {
    std::string b = round % 2 ? lz : multi;
    int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) b[rng() % b.size()] = static_cast<char>(rng());
    if (round % 7 == 0) b.resize(rng() % b.size());
    auto parsed = parse(b, "fuzz");
    if (!parsed) continue;
    for (const auto& e : all_entries(*parsed)) {
      auto p = payload(b, e, 1 << 20);  // errors are fine; crashes and overreads are not
      if (p && e.kind == Kind::Elf) (void)cubin_arch(*p);
    }
  }
  SUCCEED();
}

// cuobjdump (PyPI's nvidia-cuda-cuobjdump, or the toolkit's) lists the same code.
std::string find_cuobjdump() {
  if (const char* env = std::getenv("KILN_CUOBJDUMP"); env && *env) return env;
  std::vector<fs::path> roots;
  if (const char* tools = std::getenv("KILN_TOOLS"); tools && *tools) roots.emplace_back(tools);
  if (const char* home = std::getenv("HOME")) roots.push_back(fs::path(home) / ".cache/kiln/tools");
  std::error_code ec;
  for (const auto& root : roots) {
    for (const auto& lib :
         {"lib/python3.11", "lib/python3.12", "lib/python3.13", "lib/python3.10"}) {
      fs::path nvidia = root / lib / "site-packages/nvidia";
      if (!fs::is_directory(nvidia, ec)) continue;
      for (auto it = fs::recursive_directory_iterator(nvidia, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->path().filename() == "cuobjdump" && it->is_regular_file(ec))
          return it->path().string();
    }
  }
  return find_program("cuobjdump").string();
}

TEST(Fatbin, AgreesWithCuobjdump) {
  std::string cuobjdump = find_cuobjdump();
  if (cuobjdump.empty())
    GTEST_SKIP() << "cuobjdump not found (scripts/test installs nvidia-cuda-cuobjdump)";
  static const std::regex line(R"((ELF|PTX) file\s+\d+: .*\.(sm_\d+[af]?)\.(cubin|ptx))");
  for (const char* name : {"multi.fatbin", "variants.fatbin", "plain.fatbin", "lz.fatbin",
                           "zstd.fatbin", "kernel.o"}) {
    SCOPED_TRACE(name);
    auto out = run_capture({cuobjdump, "--list-elf", "--list-ptx", fixture(name).string()});
    ASSERT_TRUE(out) << out.error().message << out.error().detail;
    std::vector<std::string> theirs;
    for (const auto& l : split(*out, "\n")) {
      std::smatch m;
      if (std::regex_search(l, m, line))
        theirs.push_back(cat(m[1] == "ELF" ? "elf " : "ptx ", m[2].str()));
    }
    std::string image = load(name);
    std::string_view section = image;
    elf::ElfInfo info;
    if (std::string(name).ends_with(".o")) {
      info = elf::read_elf(image, name).value();
      section = *elf::section_bytes(image, *info.section(".nv_fatbin"));
    }
    std::vector<std::string> ours;
    for (const auto& e : all_entries(parse(section, name).value())) {
      // cuobjdump names family-specific cubins without their "f" (its -elf output shows it).
      std::string arch =
          e.kind == Kind::Elf && e.variant == 'f' ? cat("sm_", e.arch) : e.arch_name();
      ours.push_back(cat(e.kind == Kind::Elf ? "elf " : "ptx ", arch));
    }
    std::sort(theirs.begin(), theirs.end());
    std::sort(ours.begin(), ours.end());
    EXPECT_EQ(ours, theirs) << *out;
  }
}

}  // namespace
}  // namespace kiln::fatbin
