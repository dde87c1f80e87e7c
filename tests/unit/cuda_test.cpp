// The CUDA toolkit sources: the wheel toolkit's layout, its errors (nothing left behind), its
// identity; the host compiler range read from a toolkit's headers.
#include "toolchain/cuda.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <map>
#include <regex>

#include "archive/zip_writer.h"
#include "cache/store.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::toolchain {

namespace fs = std::filesystem;

namespace {

// A stand-in nvcc: prints what the real one prints for --version.
std::string fake_nvcc(const std::string& release) {
  return cat(
      "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\necho 'Cuda compilation tools, "
      "release ",
      release, ", V", release, ".88'\n");
}

const char* kHostConfig =
    "#if defined(__GNUC__)\n\n#if __GNUC__ > 15\n\n#error -- unsupported GNU version! gcc versions "
    "later than 15 are not supported!\n\n#endif /* __GNUC__ > 15 */\n#endif\n";

class CudaWheels : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           cat("kiln-cuda-test-", ::getpid(), "-",
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "wheels");
    toolkits_ = dir_ / "toolkits";
    store_ = cache::Store(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A wheel holding `files` (path -> content; executables end in '*' in the map key).
  fs::path wheel(const std::string& name, const std::map<std::string, std::string>& files) {
    fs::path path = dir_ / "wheels" / name;
    auto w = archive::ZipWriter::create(path).value();
    for (const auto& [key, data] : files) {
      bool exec = key.back() == '*';
      w.add(exec ? key.substr(0, key.size() - 1) : key, data, exec).value();
    }
    w.add(cat(name.substr(0, name.find('-')), "-1.0.dist-info/METADATA"), "Name: x\n").value();
    w.finish().value();
    return path;
  }

  // The CUDA 13 layout: every component under nvidia/cu13/.
  std::vector<fs::path> cu13_wheels(const std::string& release = "13.0") {
    return {
        wheel("nvidia_cuda_nvcc-13.0.88-py3-none-x.whl",
              {{"nvidia/cu13/bin/nvcc*", fake_nvcc(release)},
               {"nvidia/cu13/bin/nvcc.profile", "TOP = $(_HERE_)/..\n"},
               {"nvidia/cu13/bin/cudafe++*", "x"},
               {"nvidia/cu13/bin/ptxas*", "x"},
               {"nvidia/cu13/bin/fatbinary*", "x"},
               {"nvidia/cu13/bin/nvlink*", "x"},
               {"nvidia/cu13/include/fatbinary_section.h", "fb"}}),
        wheel("nvidia_nvvm-13.0.88-py3-none-x.whl",
              {{"nvidia/cu13/nvvm/bin/cicc*", "x"},
               {"nvidia/cu13/nvvm/libdevice/libdevice.10.bc", "bc"}}),
        wheel("nvidia_cuda_crt-13.0.88-py3-none-x.whl",
              {{"nvidia/cu13/include/crt/host_config.h", kHostConfig}}),
        wheel("nvidia_cuda_runtime-13.0.96-py3-none-x.whl",
              {{"nvidia/cu13/include/cuda_runtime.h", "rt"},
               {"nvidia/cu13/lib/libcudart.so.13", "so"},
               {"nvidia/cu13/include/fatbinary_section.h", "fb"}}),  // the same file twice is fine
        wheel("nvidia_cuda_cccl-13.0.85-py3-none-x.whl",
              {{"nvidia/cu13/include/cccl/cuda/std/version", "v"},
               {"nvidia/cu13/.metadata/provenance.txt", "p"}})};
  }

  CudaRequest request(const std::vector<fs::path>& wheels, const std::string& version = "13.0") {
    CudaRequest r;
    r.toolkit = manifest::ToolkitKind::Wheels;
    r.version = version;
    for (const auto& w : wheels) r.wheels.push_back({w.filename().string(), std::string(64, 'a')});
    for (std::size_t i = 0; i < r.wheels.size(); ++i)
      r.wheels[i].sha256[0] = static_cast<char>('a' + i);
    return r;
  }

  // What is in toolkits/ besides lock files.
  std::vector<std::string> leftovers() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(toolkits_, ec))
      if (e.path().extension() != ".lock") out.push_back(e.path().filename().string());
    return out;
  }

  fs::path dir_, toolkits_;
  cache::Store store_{fs::path()};  // the cache at dir_: its toolkits/ is toolkits_
};

}  // namespace

TEST_F(CudaWheels, LaysOutAToolkitOnce) {
  auto wheels = cu13_wheels();
  CudaRequest r = request(wheels);
  CudaToolkit t = cuda_from_wheels(r, wheels, store_).value();
  EXPECT_EQ(t.home, toolkits_ / wheel_toolkit_of(r).name);
  // The name the cache has always had: cuda-<version>-<the sorted pins' sha256, 16 digits>.
  std::vector<std::string> pins;
  for (const auto& w : r.wheels) pins.push_back(cat(w.sha256, " ", w.file));
  std::sort(pins.begin(), pins.end());
  EXPECT_EQ(t.home, toolkits_ / cat("cuda-13.0-", sha256_hex(join(pins, "\n")).substr(0, 16)));
  EXPECT_EQ(t.home.filename().string().rfind("cuda-13.0-", 0), 0u);
  EXPECT_EQ(t.version, "13.0");
  EXPECT_NE(t.version_text.find("release 13.0, V13.0.88"), std::string::npos);
  EXPECT_EQ(t.nvcc, t.home / "bin" / "nvcc");
  // Laid out like an installed toolkit.
  EXPECT_TRUE(fs::is_regular_file(t.home / "nvvm" / "bin" / "cicc"));
  EXPECT_TRUE(fs::is_regular_file(t.home / "include" / "crt" / "host_config.h"));
  EXPECT_EQ(fs::read_symlink(t.home / "lib64"), "lib");
  EXPECT_EQ(fs::read_symlink(t.home / "lib" / "libcudart.so"), "libcudart.so.13");
  EXPECT_EQ(fs::read_symlink(t.home / "targets" / "x86_64-linux" / "include"), "../../include");
  EXPECT_TRUE(
      fs::is_regular_file(t.home / "targets" / "x86_64-linux" / "include" / "cuda_runtime.h"));
  EXPECT_EQ(fs::status(t.home / "bin" / "ptxas").permissions() & fs::perms::owner_exec,
            fs::perms::owner_exec);
  // Neither Python packaging nor NVIDIA's build metadata.
  EXPECT_FALSE(fs::exists(t.home / ".metadata"));
  EXPECT_EQ(leftovers(), std::vector<std::string>{t.home.filename().string()});

  // The second time it is there: the wheels are not even read.
  for (const auto& w : wheels) fs::remove(w);
  CudaToolkit again = cuda_from_wheels(r, wheels, store_).value();
  EXPECT_EQ(again.home, t.home);
  EXPECT_EQ(again.version_text, t.version_text);
}

TEST_F(CudaWheels, TheCuda12LayoutMergesPerComponentDirectories) {
  // CUDA 12 wheels keep each component under its own nvidia/<name>/ with Python __init__ files.
  auto nvcc = wheel("nvidia_cuda_nvcc_cu12-12.8.93-py3-none-x.whl",
                    {{"nvidia/__init__.py", ""},
                     {"nvidia/cuda_nvcc/__init__.py", ""},
                     {"nvidia/cuda_nvcc/bin/nvcc*", fake_nvcc("12.8")},
                     {"nvidia/cuda_nvcc/bin/nvcc.profile", "p"},
                     {"nvidia/cuda_nvcc/bin/cudafe++*", "x"},
                     {"nvidia/cuda_nvcc/bin/ptxas*", "x"},
                     {"nvidia/cuda_nvcc/bin/fatbinary*", "x"},
                     {"nvidia/cuda_nvcc/bin/nvlink*", "x"},
                     {"nvidia/cuda_nvcc/nvvm/bin/cicc*", "x"},
                     {"nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc", "bc"},
                     {"nvidia/cuda_nvcc/include/crt/host_config.h", kHostConfig}});
  auto rt = wheel("nvidia_cuda_runtime_cu12-12.8.90-py3-none-x.whl",
                  {{"nvidia/cuda_runtime/include/__init__.py", ""},
                   {"nvidia/cuda_runtime/include/cuda_runtime.h", "rt"},
                   {"nvidia/cuda_runtime/lib/libcudart.so.12", "so"}});
  auto cccl = wheel("nvidia_cuda_cccl_cu12-12.8.90-py3-none-x.whl",
                    {{"nvidia/cuda_cccl/include/cuda/std/version", "v"}});
  CudaToolkit t =
      cuda_from_wheels(request({nvcc, rt, cccl}, "12.8"), {nvcc, rt, cccl}, store_).value();
  EXPECT_EQ(t.version, "12.8");
  EXPECT_FALSE(fs::exists(t.home / "include" / "__init__.py"));
  EXPECT_EQ(fs::read_symlink(t.home / "lib" / "libcudart.so"), "libcudart.so.12");
}

TEST_F(CudaWheels, PyPIsCuda12WheelsLackTheCompilerAndSaySo) {
  // What nvidia-cuda-nvcc-cu12 12.8.93 really holds: ptxas, libnvvm, libdevice, crt headers.
  auto nvcc = wheel("nvidia_cuda_nvcc_cu12-12.8.93-py3-none-x.whl",
                    {{"nvidia/cuda_nvcc/bin/ptxas*", "x"},
                     {"nvidia/cuda_nvcc/nvvm/lib64/libnvvm.so", "so"},
                     {"nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc", "bc"},
                     {"nvidia/cuda_nvcc/include/crt/host_config.h", kHostConfig}});
  auto rt = wheel("nvidia_cuda_runtime_cu12-12.8.90-py3-none-x.whl",
                  {{"nvidia/cuda_runtime/include/cuda_runtime.h", "rt"},
                   {"nvidia/cuda_runtime/lib/libcudart.so.12", "so"}});
  auto cccl = wheel("nvidia_cuda_cccl_cu12-12.8.90-py3-none-x.whl",
                    {{"nvidia/cuda_cccl/include/cuda/std/version", "v"}});
  auto t = cuda_from_wheels(request({nvcc, rt, cccl}, "12.8"), {nvcc, rt, cccl}, store_);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().kind, ErrorKind::BadInput);
  EXPECT_NE(t.error().message.find("the pinned CUDA 12.8 wheels make no complete toolkit: missing "
                                   "bin/nvcc, bin/nvcc.profile, "
                                   "bin/cudafe++, bin/fatbinary, bin/nvlink, nvvm/bin/cicc"),
            std::string::npos)
      << t.error().message;
  EXPECT_NE(t.error().message.find("NVIDIA's CUDA 12 wheels on PyPI carry no compiler"),
            std::string::npos);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(CudaWheels, AnotherReleaseThanTheTargetsIsRefused) {
  auto wheels = cu13_wheels("13.1");
  auto t = cuda_from_wheels(request(wheels), wheels, store_);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message,
            "the pinned CUDA wheels hold nvcc 13.1, but the target asks for CUDA 13.0: pin the "
            "wheels of CUDA 13.0");
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(CudaWheels, ConflictingFilesAndForeignWheelsAreRefused) {
  auto wheels = cu13_wheels();
  wheels.push_back(
      wheel("nvidia_other-1.0-py3-none-x.whl", {{"nvidia/cu13/include/cuda_runtime.h", "other"}}));
  auto t = cuda_from_wheels(request(wheels), wheels, store_);
  ASSERT_FALSE(t);
  EXPECT_EQ(t.error().message,
            "two of the pinned CUDA wheels hold different files at include/cuda_runtime.h");
  EXPECT_TRUE(leftovers().empty());

  auto not_nvidia = wheel("torch-2.11.0-cp311-cp311-x.whl", {{"torch/version.py", "x"}});
  auto u = cuda_from_wheels(request({not_nvidia}), {not_nvidia}, store_);
  ASSERT_FALSE(u);
  EXPECT_EQ(u.error().message,
            "torch-2.11.0-cp311-cp311-x.whl is not an NVIDIA CUDA component wheel (no nvidia/ "
            "directory)");
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(CudaWheels, StaleStagingOfADeadProcessIsCleanedUp) {
  auto wheels = cu13_wheels();
  CudaRequest r = request(wheels);
  const std::string name = wheel_toolkit_of(r).name;
  fs::create_directories(toolkits_ / cat(".", name, ".tmp-dead") / "root" / "bin");
  fs::create_directories(toolkits_ / name / "bin");  // no marker: never completed
  CudaToolkit t = cuda_from_wheels(r, wheels, store_).value();
  EXPECT_TRUE(fs::exists(t.home / "kiln-toolkit.json"));
  EXPECT_EQ(leftovers(), std::vector<std::string>{name});
}

TEST_F(CudaWheels, SourcesAndIdentities) {
  auto wheels = cu13_wheels();
  CudaRequest r = request(wheels);
  // The identity is the pins: nothing is fetched for it.
  int fetched = 0;
  auto source = make_cuda_source(
      r, &store_, [&](const std::string& file, const std::string&) -> Expected<fs::path> {
        ++fetched;
        return dir_ / "wheels" / file;
      });
  nlohmann::json id = source->identity().value();
  EXPECT_EQ(id["toolkit"], "wheels");
  EXPECT_EQ(id["version"], "13.0");
  EXPECT_EQ(id["wheels"].size(), 5u);
  EXPECT_EQ(id["wheels"][0]["file"], wheels[0].filename().string());
  EXPECT_EQ(fetched, 0);
  EXPECT_EQ(source->toolkit().value().version, "13.0");
  EXPECT_EQ(fetched, 5);
  // A failed fetch names the toolkit.
  cache::Store elsewhere(dir_ / "other");
  auto failing = make_cuda_source(
      request(cu13_wheels()), &elsewhere,
      [](const std::string& file, const std::string&) -> Expected<fs::path> {
        return Error::failed(cat(file, " is not in the cache and kiln is offline"));
      });
  auto t = failing->toolkit();
  ASSERT_FALSE(t);
  EXPECT_EQ(
      t.error().message.rfind(
          "CUDA 13.0 toolkit: nvidia_cuda_nvcc-13.0.88-py3-none-x.whl is not in the cache", 0),
      0u);

  // The set, not its order, names the toolkit; another pin, another toolkit.
  CudaRequest reordered = r;
  std::reverse(reordered.wheels.begin(), reordered.wheels.end());
  EXPECT_EQ(wheel_toolkit_of(reordered).name, wheel_toolkit_of(r).name);
  CudaRequest other = r;
  other.wheels[0].sha256[1] = 'f';
  EXPECT_NE(wheel_toolkit_of(other).name, wheel_toolkit_of(r).name);

  // The system source with a home that has no nvcc names where it looked.
  CudaRequest sys;
  sys.home = (dir_ / "no-cuda").string();
  auto missing = system_cuda_source(sys)->toolkit();
  if (!missing) {
    EXPECT_NE(missing.error().message.find(cat(sys.home, " (the target's cuda.home)")),
              std::string::npos);
  }
}

TEST_F(CudaWheels, HostCompilerRangeComesFromTheToolkit) {
  auto wheels = cu13_wheels();
  CudaToolkit t = cuda_from_wheels(request(wheels), wheels, store_).value();
  GccRange range = supported_gcc(t);
  EXPECT_EQ(range.min, 7);
  EXPECT_EQ(range.max, 15);
  HostCompiler gcc12{"g++", "/usr/bin/g++", "12.2.0", "g++ (Debian 12.2.0-14+deb12u1) 12.2.0"};
  EXPECT_TRUE(check_host_compiler(t, gcc12));
  HostCompiler gcc16{"g++-16", "/usr/bin/g++-16", "16.1.0", "g++-16 (GCC) 16.1.0"};
  auto e = check_host_compiler(t, gcc16);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message,
            cat("host compiler g++-16 16.1.0 (/usr/bin/g++-16) is outside the GCC versions CUDA "
                "13.0 supports (7 to 15, from ",
                (t.home / "include" / "crt" / "host_config.h").string(),
                "): install a g++ in that range and name it in the target's [compiler] cxx"));
  HostCompiler clang{"clang++", "/usr/bin/clang++", "19.0.0", "Debian clang version 19.0.0"};
  EXPECT_TRUE(check_host_compiler(t, clang));
}

TEST(CudaSystem, TheMachinesToolkitWhenThereIsOne) {
  if (!fs::exists("/usr/local/cuda/bin/nvcc")) GTEST_SKIP() << "no CUDA toolkit at /usr/local/cuda";
  CudaRequest r;
  r.home = "/usr/local/cuda";
  auto source = make_cuda_source(r, {}, {});
  CudaToolkit t = source->toolkit().value();
  EXPECT_EQ(t.home, "/usr/local/cuda");
  EXPECT_FALSE(t.version.empty());
  EXPECT_EQ(source->identity().value()["toolkit"], "system");
  EXPECT_EQ(source->identity().value()["version"], t.version);
  // The machine's toolkit states its own GCC limit.
  EXPECT_GE(supported_gcc(t).max, 12);
}

// parse_nvcc_release and the host_config.h reader were std::regex searches; the hand-written ones
// find the same thing on short texts and never recurse on long ones.
TEST(CudaText, MatchersAgreeWithTheRegularExpressionsTheyReplaced) {
  const std::regex release(R"(release ([0-9]+\.[0-9]+))");
  for (std::string s :
       {"Cuda compilation tools, release 13.0, V13.0.88", "release 12.8", "release 12.",
        "release .8", "release  12.8", "release 12.8.1", "releases 1.2 release 3.4",
        "release x release 1.2", "Release 1.2", "release 1", "", "release 123.456789"}) {
    std::smatch m;
    EXPECT_EQ(parse_nvcc_release(s), std::regex_search(s, m, release) ? m[1].str() : "")
        << "'" << s << "'";
  }
  const std::regex gcc(
      R"(#if\s+__GNUC__\s*>\s*([0-9]+)\s*\n\s*\n?\s*#error[^\n]*unsupported GNU version)");
  for (std::string s :
       {std::string(kHostConfig), std::string("#if __GNUC__ > 13\n#error unsupported GNU version"),
        std::string("#if __GNUC__>13\n\n\n  #error -- unsupported GNU version!"),
        std::string("#if __GNUC__ > 13 #error unsupported GNU version"),
        std::string("#if __GNUC__ > 13\n#error other\nunsupported GNU version"),
        std::string("#ifdef __GNUC__ > 13\n#error unsupported GNU version"),
        std::string("#if  \t __GNUC__ \n > \n 14 \t\n\t#error x unsupported GNU version y"),
        std::string(
            "#if __GNUC__ > 13\n#error x\n#if __GNUC__ > 14\n#error unsupported GNU version"),
        std::string("#if __GNUC__ > \n#error unsupported GNU version"),
        std::string("#if__GNUC__ > 13\n#error unsupported GNU version"),
        std::string("#if __GNUC__ > 13\r\n#error unsupported GNU version"),
        std::string("#if __GNUC__ > 13\r#error unsupported GNU version"), std::string()}) {
    std::smatch m;
    int want = std::regex_search(s, m, gcc) ? std::stoi(m[1].str()) : 0;
    EXPECT_EQ(host_config_gcc_max(s), want) << "'" << s << "'";
  }
  // std::stoi threw on this one; a number past int is no GCC major.
  EXPECT_EQ(
      host_config_gcc_max("#if __GNUC__ > 99999999999999999999\n#error unsupported GNU version"),
      0);
  const std::string mb(1 << 20, ' ');
  EXPECT_EQ(parse_nvcc_release("release " + std::string(1 << 20, '1') + ".2"),
            std::string(1 << 20, '1') + ".2");
  EXPECT_EQ(host_config_gcc_max("#if" + mb + "__GNUC__" + mb + ">" + mb + "15" + mb + "\n" + mb +
                                "#error" + std::string(1 << 20, '-') + "unsupported GNU version"),
            15);
}

}  // namespace kiln::toolchain
