// The CUDA toolkit from Debian packages: where each package file goes, the layout made from small
// crafted packages (a stand-in nvcc), its errors (nothing left behind), its identity, the
// compatibility rule with torch's CUDA and the archs a release can build.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "toolchain/cuda.h"

namespace kiln::toolchain {
namespace {

namespace fs = std::filesystem;

struct DebMember {
  std::string name;
  std::string data;
  std::string link;  // a symlink when set
  unsigned mode = 0644;
};

std::string tar_xz(const std::vector<DebMember>& members) {
  std::vector<char> buf(4 << 20);
  std::size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_xz(a);
  EXPECT_EQ(archive_write_open_memory(a, buf.data(), buf.size(), &used), ARCHIVE_OK);
  for (const auto& m : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, m.name.c_str());
    archive_entry_set_perm(e, m.mode);
    if (!m.link.empty()) {
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_symlink(e, m.link.c_str());
      archive_entry_set_size(e, 0);
    } else {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_size(e, static_cast<la_int64_t>(m.data.size()));
    }
    archive_write_header(a, e);
    if (m.link.empty()) archive_write_data(a, m.data.data(), m.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

std::string ar_member(const std::string& name, const std::string& data) {
  char header[61];
  std::snprintf(header, sizeof header, "%-16s%-12s%-6s%-6s%-8s%-10zu`\n", name.c_str(), "0", "0",
                "0", "100644", data.size());
  std::string out(header, 60);
  out += data;
  if (out.size() % 2) out += '\n';
  return out;
}

std::string deb(const std::vector<DebMember>& members) {
  return "!<arch>\n" + ar_member("debian-binary", "2.0\n") +
         ar_member("control.tar.xz", tar_xz({{"./control", "Package: x\n"}})) +
         ar_member("data.tar.xz", tar_xz(members));
}

std::string fake_debian_nvcc(const std::string& release) {
  return cat("#!/bin/sh\necho 'Cuda compilation tools, release ", release, ", V", release,
             ".131'\n");
}

const char* kToolkit = "nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb";

// The packages' members, split like Debian's (the compiler, the headers and cudart, CCCL).
std::vector<std::pair<std::string, std::vector<DebMember>>> packages(const std::string& release) {
  return {
      {kToolkit,
       {{"./usr/bin/nvcc", "#!/bin/sh\nexec /usr/lib/nvidia-cuda-toolkit/bin/nvcc\n", "", 0755},
        {"./usr/lib/nvidia-cuda-toolkit/bin/nvcc", fake_debian_nvcc(release), "", 0755},
        {"./usr/lib/nvidia-cuda-toolkit/bin/cicc", "cicc", "", 0755},
        {"./usr/lib/nvidia-cuda-toolkit/bin/crt/link.stub", "stub"},
        {"./usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile", "", "/etc/nvcc.profile"},
        {"./usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc", "bc"},
        {"./etc/nvcc.profile", "PATH += /usr/lib/nvidia-cuda-toolkit/bin:"},
        {"./usr/bin/cudafe++", "x", "", 0755},
        {"./usr/bin/ptxas", "x", "", 0755},
        {"./usr/bin/fatbinary", "x", "", 0755},
        {"./usr/bin/nvlink", "x", "", 0755},
        {"./usr/bin/nvdisasm", "not needed", "", 0755},
        {"./usr/include/nvvm.h", "nvvm"},
        {"./usr/lib/cuda/include/cuda.h", "", "../../../include/cuda.h"}}},
      {"nvidia-cuda-dev_12.4.127~12.4.1-2_amd64.deb",
       {{"./usr/include/cuda_runtime.h", "rt"},
        {"./usr/include/crt/host_config.h",
         "#if __GNUC__ > 13\n#error -- unsupported GNU version!\n"},
        {"./usr/lib/x86_64-linux-gnu/libcudart.so", "", "libcudart.so.12"},
        {"./usr/lib/x86_64-linux-gnu/libcudart_static.a", "a"},
        {"./usr/lib/x86_64-linux-gnu/libcublas.so", "", "libcublas.so.12"},
        {"./usr/lib/x86_64-linux-gnu/stubs/libcuda.so", "stub"}}},
      {"libcudart12_12.4.127~12.4.1-2_amd64.deb",
       {{"./usr/lib/x86_64-linux-gnu/libcudart.so.12.4.127", "cudart"},
        {"./usr/lib/x86_64-linux-gnu/libcudart.so.12", "", "libcudart.so.12.4.127"}}},
      {"libcu++-dev_2.3.2-2_all.deb", {{"./usr/include/cuda/std/version", "v"}}},
      {"libcub-dev_2.3.2-2_all.deb", {{"./usr/include/cub/cub.cuh", "cub"}}},
      {"libthrust-dev_2.3.2-2_all.deb",
       {{"./usr/include/thrust/version.h", "t"}, {"./usr/include/cuda/std/version", "v"}}},
  };
}

class CudaDebian : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           cat("kiln-cuda-deb-", ::getpid(), "-",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "downloads");
    store_ = cache::Store(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the packages; the request pins them (fake sha256s: the download cache checks those).
  CudaRequest make(const std::vector<std::pair<std::string, std::vector<DebMember>>>& pkgs) {
    CudaRequest r;
    r.toolkit = manifest::ToolkitKind::Debian;
    r.version = "12.8";
    files_.clear();
    for (std::size_t i = 0; i < pkgs.size(); ++i) {
      fs::path p = dir_ / "downloads" / pkgs[i].first;
      std::ofstream(p, std::ios::binary) << deb(pkgs[i].second);
      files_.push_back(p);
      r.debs.push_back({cat("pool/non-free/n/nvidia-cuda-toolkit/", pkgs[i].first),
                        std::string(63, 'a') + char('0' + i)});
    }
    return r;
  }
  // Only the toolkit and its lock are left in toolkits/ (no temporary directory).
  std::vector<std::string> toolkits_entries() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_ / "toolkits", ec))
      if (e.path().extension() != ".lock")  // a toolkit's lock, an empty file, stays
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
  cache::Store store_{dir_};  // set in SetUp: the cache at dir_
  std::vector<fs::path> files_;
};

TEST_F(CudaDebian, LaysOutAToolkitThatReadsNothingFromUsr) {
  CudaRequest r = make(packages("12.4"));
  CudaToolkit t = cuda_from_debs(r, files_, store_).value();
  fs::path root = dir_ / "toolkits" / debian_toolkit_of(r).name;
  // The name the cache has always had: cuda-<release>-debian-<the sorted pins' sha256, 16 digits>.
  std::vector<std::string> pins;
  for (const auto& d : r.debs) pins.push_back(cat(d.sha256, " ", d.file));
  std::sort(pins.begin(), pins.end());
  EXPECT_EQ(root, dir_ / "toolkits" /
                      cat("cuda-12.4-debian-", sha256_hex(join(pins, "\n")).substr(0, 16)));
  EXPECT_EQ(t.home, root);
  EXPECT_EQ(t.version, "12.4");
  EXPECT_EQ(read_file(root / "bin/nvcc").value(),
            fake_debian_nvcc("12.4"));  // the real one, not /usr/bin's
  EXPECT_EQ(read_file(root / "nvvm/bin/cicc").value(), "cicc");
  EXPECT_TRUE(fs::is_regular_file(root / "nvvm/libdevice/libdevice.10.bc"));
  EXPECT_TRUE(fs::is_regular_file(root / "nvvm/include/nvvm.h"));
  EXPECT_TRUE(fs::is_regular_file(root / "bin/crt/link.stub"));
  EXPECT_EQ(read_file(root / "lib64/libcudart.so").value(), "cudart");  // through two links
  EXPECT_EQ(fs::read_symlink(root / "lib"), "lib64");
  EXPECT_TRUE(fs::is_regular_file(root / "targets/x86_64-linux/include/cuda/std/version"));
  EXPECT_TRUE(fs::is_regular_file(root / "lib64/stubs/libcuda.so"));
  EXPECT_FALSE(fs::exists(root / "bin/nvdisasm"));
  EXPECT_FALSE(fs::exists(root / "etc"));
  EXPECT_FALSE(fs::exists(root / "usr"));
  // nvcc.profile: kiln's own, every path relative to nvcc, not a link to /etc.
  EXPECT_FALSE(fs::is_symlink(root / "bin/nvcc.profile"));
  std::string profile = read_file(root / "bin/nvcc.profile").value();
  EXPECT_NE(profile.find("NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice"), std::string::npos);
  EXPECT_NE(profile.find("TOP              = $(_HERE_)/.."), std::string::npos);
  EXPECT_EQ(profile.find("/usr"), std::string::npos);
  // No link anywhere leaves the toolkit.
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_symlink()) continue;
    fs::path resolved = fs::weakly_canonical(e.path());
    EXPECT_TRUE(path_within(resolved, fs::canonical(root))) << e.path() << " -> " << resolved;
  }
  auto marker = nlohmann::json::parse(read_file(root / "kiln-toolkit.json").value());
  EXPECT_EQ(marker["release"], "12.4");
  EXPECT_EQ(marker["debs"].size(), 6u);
  // Nothing else beside it but its lock (no staging).
  EXPECT_EQ(toolkits_entries(), (std::vector<std::string>{root.filename().string()}));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "toolkits" / cat(root.filename().string(), ".lock")));
  // A second call opens what is there.
  EXPECT_EQ(cuda_from_debs(r, files_, store_).value().version, "12.4");
}

TEST_F(CudaDebian, ErrorsLeaveNothingBehind) {
  auto pkgs = packages("12.4");
  pkgs.pop_back();  // no libthrust-dev
  CudaRequest r = make(pkgs);
  auto t = cuda_from_debs(r, files_, store_);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("missing include/thrust/version.h"), std::string::npos)
      << t.error().message;
  EXPECT_TRUE(toolkits_entries().empty());

  pkgs = packages("12.4");
  pkgs.back().second.push_back({"./usr/include/cuda/std/version", "another"});
  r = make(pkgs);
  t = cuda_from_debs(r, files_, store_);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("different files at include/cuda/std/version"),
            std::string::npos)
      << t.error().message;

  pkgs = packages("12.4");
  pkgs.back().second.push_back({"./usr/include/thrust/up", "", "../cub/cub.cuh"});
  r = make(pkgs);
  t = cuda_from_debs(r, files_, store_);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("outside its own directory"), std::string::npos)
      << t.error().message;

  r = make(packages("12.6"));  // nvcc says 12.6, the package name 12.4
  t = cuda_from_debs(r, files_, store_);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("hold nvcc 12.6"), std::string::npos) << t.error().message;
  EXPECT_TRUE(toolkits_entries().empty());
}

TEST(CudaDebianPaths, WhereEachPackageFileGoes) {
  EXPECT_EQ(debian_toolkit_path("usr/lib/nvidia-cuda-toolkit/bin/nvcc"), "bin/nvcc");
  EXPECT_EQ(debian_toolkit_path("usr/lib/nvidia-cuda-toolkit/bin/cicc"), "nvvm/bin/cicc");
  EXPECT_EQ(debian_toolkit_path("usr/bin/ptxas"), "bin/ptxas");
  EXPECT_EQ(debian_toolkit_path("usr/include/nvvm.h"), "nvvm/include/nvvm.h");
  EXPECT_EQ(debian_toolkit_path("usr/include/cub/cub.cuh"), "include/cub/cub.cuh");
  EXPECT_EQ(debian_toolkit_path("usr/lib/x86_64-linux-gnu/libcudart.so.12"),
            "lib64/libcudart.so.12");
  EXPECT_EQ(debian_toolkit_path("usr/lib/x86_64-linux-gnu/libnvvm.so.4.0.0"),
            "nvvm/lib64/libnvvm.so.4.0.0");
  for (const char* no :
       {"usr/bin/nvcc", "usr/bin/nvdisasm", "etc/nvcc.profile", "usr/include/",
        "usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile", "usr/lib/x86_64-linux-gnu/libcudartx.so",
        "usr/lib/x86_64-linux-gnu/libcudart.so.12/x", "usr/lib/cuda/include/cuda.h",
        "usr/share/doc/nvidia-cuda-toolkit/copyright"})
    EXPECT_EQ(debian_toolkit_path(no), "") << no;
}

TEST(CudaDebianPaths, ReleaseNameAndIdentity) {
  CudaRequest r;
  r.toolkit = manifest::ToolkitKind::Debian;
  r.version = "12.8";
  r.debs = {{"pool/main/c/cccl/libcub-dev_2.3.2-2_all.deb", std::string(64, 'b')},
            {cat("pool/non-free/n/nvidia-cuda-toolkit/", kToolkit), std::string(64, 'a')}};
  EXPECT_EQ(debian_release(r).value(), "12.4");
  CudaRequest swapped = r;
  std::swap(swapped.debs[0], swapped.debs[1]);
  EXPECT_EQ(debian_toolkit_of(r).name, debian_toolkit_of(swapped).name);  // the set, not the order
  EXPECT_TRUE(debian_toolkit_of(r).name.starts_with("cuda-12.4-debian-"));
  auto id = debian_cuda_source(r, {}, {})->identity().value();
  EXPECT_EQ(id["toolkit"], "debian");
  EXPECT_EQ(id["release"], "12.4");
  EXPECT_NE(id["compatibility"].get<std::string>().find("minor version compatibility"),
            std::string::npos);
  EXPECT_EQ(id["debs"].size(), 2u);
  // Refused before anything is fetched: a torch of CUDA 13, or of an older 12 minor.
  r.version = "13.0";
  EXPECT_FALSE(debian_cuda_source(r, {}, {})->identity());
  r.version = "12.1";
  EXPECT_FALSE(debian_cuda_source(r, {}, {})->identity());
  r.debs.pop_back();
  EXPECT_FALSE(debian_release(r));
}

TEST(CudaCompatibility, SameMajorAndNoNewerMinor) {
  EXPECT_NE(cuda_compatibility("12.4", "12.8").value().find("nvcc 12.4 <= torch's CUDA 12.8"),
            std::string::npos);
  EXPECT_EQ(cuda_compatibility("12.8", "12.8").value(), "same CUDA release 12.8");
  EXPECT_FALSE(cuda_compatibility("12.9", "12.8"));
  EXPECT_FALSE(cuda_compatibility("13.0", "12.8"));
  EXPECT_FALSE(cuda_compatibility("12.4", "13.0"));
  EXPECT_FALSE(cuda_compatibility("12", "12.8"));
  EXPECT_FALSE(cuda_compatibility("12.4", "x"));
}

}  // namespace
}  // namespace kiln::toolchain
