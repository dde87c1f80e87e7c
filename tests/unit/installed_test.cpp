// validate/installed: an installed distribution's files from its RECORD, read only inside the site
// directory; gpu-target per GPU, ptx-jit against the driver's CUDA, torch-abi.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "../support/expect.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/process.h"
#include "core/strings.h"
#include "unit/source_dir.h"
#include "validate/checks.h"
#include "validate/validate.h"

namespace kiln::validate {
namespace {

class Installed : public ::testing::Test {
 protected:
  // Shared objects with the fatbin fixtures (tests/data/fatbin) as their .nv_fatbin, and an
  // extension needing a symbol the stand-in torch lacks; compiled once for the suite.
  static void SetUpTestSuite() {
    dir_ = new TempDir(TempDir::create(fs::temp_directory_path(), "kiln-installed-").value());
    const fs::path d = dir_->path();
    std::ofstream(d / "dev.c") << "void* PyInit_dev(void) { return 0; }\n";
    run_capture({"gcc", "-shared", "-fPIC", "-o", (d / "dev.so").string(), (d / "dev.c").string()})
        .value();
    fs::path data = fs::path(kiln::test::source_dir()) / "tests/data/fatbin";
    for (const char* f : {"multi", "variants"})
      run_capture({"objcopy", "--add-section",
                   cat(".nv_fatbin=", (data / (std::string(f) + ".fatbin")).string()),
                   (d / "dev.so").string(), (d / (std::string(f) + ".so")).string()})
          .value();
    fs::create_directories(d / "torch/lib");
    std::ofstream(d / "c10.cpp") << "namespace c10 { void present(int) {} }\n";
    run_capture({"g++", "-shared", "-fPIC", "-o", (d / "torch/lib/libc10.so").string(),
                 (d / "c10.cpp").string()})
        .value();
    std::ofstream(d / "ext.cpp") << "namespace c10 { void present(int); void removed(); }\n"
                                    "extern \"C\" void* PyInit_ext() { c10::present(1); "
                                    "c10::removed(); return 0; }\n";
    run_capture({"g++", "-shared", "-fPIC", "-o", (d / "ext.so").string(), (d / "ext.cpp").string(),
                 "-L" + (d / "torch/lib").string(), "-lc10"})
        .value();
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }

  static std::string bytes(const std::string& name) {
    return read_file(dir_->path() / name).value();
  }

  // A fresh site directory with demo_pkg-1.0.dist-info and `files` (path -> bytes) installed;
  // RECORD lists them with their hashes, then `extra_rows`.
  fs::path install(const std::map<std::string, std::string>& files,
                   const std::string& extra_rows = "") {
    fs::path site = dir_->path() / cat("site", counter_++);
    fs::create_directories(site / "demo_pkg-1.0.dist-info");
    std::string record;
    for (const auto& [path, data] : files) {
      fs::create_directories((site / path).parent_path());
      std::ofstream(site / path, std::ios::binary) << data;
      auto digest = Sha256().update(data).digest();
      record += cat(path, ",sha256=", base64_urlsafe_nopad(digest.data(), digest.size()), ",",
                    data.size(), "\n");
    }
    record += extra_rows + "demo_pkg-1.0.dist-info/RECORD,,\n";
    std::ofstream(site / "demo_pkg-1.0.dist-info/RECORD") << record;
    std::ofstream(site / "demo_pkg-1.0.dist-info/METADATA") << "Name: demo-pkg\nVersion: 1.0\n";
    return site;
  }

  static manifest::Arch gpu(const char* sm) {
    return manifest::ArchList::parse(sm).value().archs().front();
  }

  static Report check(const fs::path& site, const Options& o, std::vector<manifest::Arch> gpus) {
    return validate_installed(site, "demo_pkg-1.0.dist-info", o, gpus).value();
  }

  // "verdict: message" of each check with this id, in order.
  static std::vector<std::string> said(const Report& r, const std::string& id) {
    std::vector<std::string> out;
    for (const auto& c : r.checks)
      if (c.id == id) out.push_back(cat(verdict_name(c.verdict), ": ", c.message));
    return out;
  }

  static TempDir* dir_;
  int counter_ = 0;
};

TempDir* Installed::dir_ = nullptr;

const std::string kSo = "demo_pkg/dev.cpython-311-x86_64-linux-gnu.so";

TEST_F(Installed, ChecksEachGpuAgainstTheInstalledSharedObjects) {
  fs::path site = install({{kSo, bytes("multi.so")}, {"demo_pkg/__init__.py", "x = 1\n"}});
  Report r = check(site, {}, {gpu("sm_90"), gpu("sm_100"), gpu("sm_120")});
  EXPECT_EQ(said(r, "installed"),
            std::vector<std::string>{"pass: 3 files in RECORD, 1 ELF file(s) read"});
  auto targets = said(r, "gpu-target");
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_EQ(targets[0], "pass: runs on sm_90 (SASS present)");
  EXPECT_CONTAINS(targets[1], "fail: " + kSo + " will not run on sm_100");
  EXPECT_EQ(targets[2], "pass: runs on sm_120 (SASS present)");
  EXPECT_EQ(said(r, "gpu-code").size(), 1u);
  EXPECT_CONTAINS(said(r, "torch-abi")[0], "skip: no torch to check against");
  EXPECT_TRUE(said(r, "ptx-jit").empty());  // no driver version given
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.wheel, site / "demo_pkg-1.0.dist-info");
}

TEST_F(Installed, PtxNewerThanTheDriverCannotBeJitCompiled) {
  // variants: SASS sm_90a, sm_100f; PTX compute_75 (and a/f variants), all ISA 9.0 (CUDA 13.0).
  fs::path site = install({{kSo, bytes("variants.so")}});
  Options o;
  o.driver_cuda = "13.0";
  Report r = check(site, o, {gpu("sm_103")});
  EXPECT_CONTAINS(said(r, "gpu-target")[0], "warn: " + kSo +
                                                " runs on sm_103 only by JIT-compiling PTX "
                                                "compute_75");
  EXPECT_EQ(said(r, "ptx-jit"),
            std::vector<std::string>{
                "pass: 3 PTX entries (up to CUDA 13.0): the driver (CUDA 13.0) can JIT-compile "
                "them"});
  o.driver_cuda = "12.8";
  r = check(site, o, {gpu("sm_103")});
  EXPECT_CONTAINS(said(r, "gpu-target")[0], "fail: " + kSo + " will not run on sm_103");
  EXPECT_CONTAINS(said(r, "gpu-target")[0],
                  "(PTX compute_75 is ISA 9.0, which needs a driver for CUDA 13.0; this driver "
                  "supports CUDA 12.8)");
  EXPECT_CONTAINS(said(r, "ptx-jit")[0], "warn: " + kSo +
                                             ": PTX compute_100a is ISA 9.0 (CUDA 13.0), newer "
                                             "than this driver (CUDA 12.8) can JIT-compile");
  // SASS needs no JIT: sm_90a runs on sm_90 whatever the driver's CUDA.
  EXPECT_EQ(said(check(site, o, {gpu("sm_90")}), "gpu-target")[0],
            "pass: runs on sm_90 (SASS present)");
}

TEST_F(Installed, PtxIsaVersionsMapToTheirCudaRelease) {
  EXPECT_EQ(ptx_isa_cuda(9, 0), 130);
  EXPECT_EQ(ptx_isa_cuda(9, 2), 132);
  EXPECT_EQ(ptx_isa_cuda(8, 8), 129);
  EXPECT_EQ(ptx_isa_cuda(8, 7), 128);
  EXPECT_EQ(ptx_isa_cuda(8, 6), 127);
  EXPECT_EQ(ptx_isa_cuda(8, 5), 125);
  EXPECT_EQ(ptx_isa_cuda(8, 0), 120);
  EXPECT_EQ(ptx_isa_cuda(7, 8), 118);
  EXPECT_EQ(ptx_isa_cuda(6, 5), 102);
  EXPECT_EQ(ptx_isa_cuda(6, 0), 90);
  EXPECT_EQ(ptx_isa_cuda(0, 0), 0);
}

TEST_F(Installed, TorchAbiAgainstTheEnvironmentsTorch) {
  fs::path site = install({{"ext.cpython-311-x86_64-linux-gnu.so", bytes("ext.so")}});
  Options o;
  toolchain::TorchSysroot t;
  t.root = dir_->path() / "torch";
  t.version = "2.11.0+cu130";
  t.cuda = "13.0";
  o.torch = t;
  auto abi = said(check(site, o, {}), "torch-abi");
  ASSERT_EQ(abi.size(), 1u);
  EXPECT_CONTAINS(abi[0], "fail: ext.cpython-311-x86_64-linux-gnu.so: 1 undefined symbol(s)");
  EXPECT_CONTAINS(abi[0], "c10::removed()");
}

TEST_F(Installed, NothingOutsideTheSiteDirectoryIsRead) {
  fs::path outside = dir_->path() / cat("outside", counter_++);
  fs::create_directories(outside);
  std::ofstream(outside / "evil.so") << bytes("multi.so");
  fs::path site = install({{kSo, bytes("dev.so")}},
                          "../outside/evil.so,,\n/abs/evil.so,,\n../../bin/tool,,\n"
                          "demo_pkg/./x.so,,\ndemo_pkg/link.so,,\nlinkdir/evil.so,,\n");
  fs::create_symlink(outside / "evil.so", site / "demo_pkg/link.so");
  fs::create_directory_symlink(outside, site / "linkdir");
  Report r = check(site, {}, {gpu("sm_90")});
  const CheckResult* c = r.find("installed");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->verdict, Verdict::Fail);
  EXPECT_EQ(c->data["outside"], 4);  // the two escapes, the script and the "." path
  EXPECT_EQ(c->data["elf_files"], 1);
  std::string all = join(c->details, "\n");
  EXPECT_CONTAINS(all, "demo_pkg/link.so: a symbolic link or not a directory (not followed)");
  EXPECT_CONTAINS(all, "linkdir/evil.so: ");
  // The fatbin-carrying evil.so was never read: the one file read has no device code.
  EXPECT_CONTAINS(said(r, "gpu-target")[0], "fail: no device code in the wheel");
}

TEST_F(Installed, ChangedFilesMissingRecordAndBadNames) {
  fs::path site = install({{kSo, bytes("multi.so")}});
  std::ofstream(site / kSo, std::ios::binary | std::ios::app) << "x";
  EXPECT_CONTAINS(said(check(site, {}, {}), "installed")[0],
                  "warn: " + kSo + ": its bytes differ from RECORD's hash");
  fs::remove(site / "demo_pkg-1.0.dist-info/RECORD");
  auto r = check(site, {}, {gpu("sm_90")});
  EXPECT_CONTAINS(said(r, "installed")[0], "fail: demo_pkg-1.0.dist-info/RECORD is missing");
  EXPECT_EQ(said(r, "gpu-code")[0], "skip: no ELF files (a pure wheel)");
  for (const char* bad : {"../x.dist-info", "x.dist-inf", ".dist-info", "a/b.dist-info", ""}) {
    auto e = validate_installed(site, bad, {}, {});
    ASSERT_FALSE(e) << bad;
    EXPECT_EQ(e.error().kind, ErrorKind::BadInput);
  }
  auto missing = validate_installed(site, "other-1.0.dist-info", {}, {});
  ASSERT_FALSE(missing);
  EXPECT_CONTAINS(missing.error().message, "no such dist-info directory");
  EXPECT_FALSE(validate_installed(site / "nope", "demo_pkg-1.0.dist-info", {}, {}));
}

TEST_F(Installed, HostileRecordsStayBounded) {
  std::string rows;
  for (int i = 0; i < 1000; ++i) rows += cat("\"", std::string(5000, 'a'), "\",x,1\n");
  rows += std::string(100000, '"') + "\n";
  fs::path site = install({{kSo, bytes("multi.so")}}, rows);
  Report r = check(site, {}, {gpu("sm_90")});
  EXPECT_EQ(said(r, "gpu-target")[0], "pass: runs on sm_90 (SASS present)");
}

}  // namespace
}  // namespace kiln::validate
