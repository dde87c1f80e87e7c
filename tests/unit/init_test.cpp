// Targets from a package index: the Requires-Dist lines kiln reads, the torch files it picks, and
// the whole `target init --torch` flow against a real local HTTP index (PEP 691 JSON with PEP 658
// metadata, a real cuda-toolkit metapackage wheel, component pages).
#include <gtest/gtest.h>

#include <tuple>

#include "../support/fetch_util.h"
#include "../support/http_server.h"
#include "archive/zip_writer.h"
#include "core/fs.h"
#include "core/hash.h"
#include "fetch/downloader.h"
#include "init/cuda_wheels.h"
#include "init/from_index.h"
#include "init/requirements.h"
#include "init/toml_text.h"
#include "init/torch_requirements.h"
#include "manifest/target.h"
#include "packaging/version.h"
#include "toolchain/compiler.h"

#include "cache_layout.h"

using kiln::testing::layout;

namespace kiln::init {

using kiln::testing::HttpServer;
using kiln::testing::ScopedEnv;
using kiln::testing::write_text;

constexpr const char* kTorch211 =
    "Metadata-Version: 2.4\nName: torch\nVersion: 2.11.0\nRequires-Dist: filelock\n"
    "Requires-Dist: cuda-toolkit[cublas,cudart,cufft,cufile,cupti,curand,cusolver,cusparse,"
    "nvjitlink,nvrtc,nvtx]==13.0.2; platform_system == \"Linux\"\n"
    "Requires-Dist: triton==3.6.0; platform_system == \"Linux\"\n"
    "Requires-Dist: optree>=0.13.0; extra == \"optree\"\n\nbody\n";
constexpr const char* kTorch210 =
    "Metadata-Version: 2.4\nName: torch\nVersion: 2.10.0\n"
    "Requires-Dist: nvidia-cuda-nvrtc-cu12==12.8.93; platform_system == \"Linux\" and "
    "platform_machine == \"x86_64\"\n"
    "Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == \"Linux\" and "
    "platform_machine == \"x86_64\"\n";
constexpr const char* kToolkitMarker =
    "; (sys_platform == 'linux' and platform_machine == 'x86_64' or sys_platform == 'win32' and "
    "platform_machine == 'AMD64') and extra == ";

std::string toolkit_metadata(const std::string& v) {
  std::string out = "Metadata-Version: 2.1\nName: cuda-toolkit\nVersion: 13.2.2\n";
  for (const char* extra : {"'all'", "'nvcc'"})
    for (const char* p :
         {"nvidia-cuda-nvcc", "nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-runtime"})
      out += cat("Requires-Dist: ", p, "==", v, ".*", kToolkitMarker, extra, "\n");
  out += cat("Requires-Dist: nvidia-cuda-cccl==", v, ".*", kToolkitMarker, "'cccl'\n");
  out += cat("Requires-Dist: nvidia-cublas==13.2.1.*", kToolkitMarker, "'cublas'\n");
  return out;
}

TEST(Requirements, TakesApartPinsWithExtrasAndMarkers) {
  auto r = parse_requirement("cuda-toolkit[cublas, nvtx]==13.0.2; platform_system == \"Linux\"");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->name, "cuda-toolkit");
  EXPECT_EQ(r->extras, (std::vector<std::string>{"cublas", "nvtx"}));
  EXPECT_EQ(r->op, "==");
  EXPECT_EQ(r->version, "13.0.2");
  EXPECT_EQ(r->marker, "platform_system == \"Linux\"");
  EXPECT_EQ(r->marker_extra(), "");
  auto ranged = parse_requirement("cuda-bindings<14,>=13.0.3");
  ASSERT_TRUE(ranged);
  EXPECT_EQ(ranged->op, "");
  EXPECT_EQ(ranged->specifier, "<14,>=13.0.3");
  EXPECT_EQ(parse_requirement("x==1.0; extra == 'nvcc'")->marker_extra(), "nvcc");
  EXPECT_FALSE(parse_requirement("[oops]==1"));
  EXPECT_FALSE(parse_requirement("name[unclosed==1"));
}

TEST(Requirements, TorchCudaFromItsOwnMetadata) {
  auto cuda = cuda_from_metadata(kTorch211);
  ASSERT_TRUE(cuda);
  EXPECT_EQ(cuda->version, "13.0");
  EXPECT_EQ(cuda->release, "13.0.2");
  auto cu12 = cuda_from_metadata(kTorch210);
  ASSERT_TRUE(cu12);
  EXPECT_EQ(cu12->version, "12.8");
  EXPECT_EQ(cu12->release, "");
  EXPECT_NE(cu12->source.find("nvidia-cuda-runtime-cu12==12.8.90"), std::string::npos);
  // A CPU build, and a label alone, say nothing.
  EXPECT_FALSE(cuda_from_metadata("Name: torch\nVersion: 2.11.0+cu128\nRequires-Dist: filelock\n"));
}

TEST(Requirements, MetadataWithControlCharactersIsRefusedNamingWhereAndTheField) {
  const std::string head = "Name: torch\nVersion: 2.11.0\n";
  EXPECT_TRUE(check_requires_dist(head + "Requires-Dist: cuda-toolkit==13.0.2\n", "u"));
  // A folded line: its line break would end the comment kiln writes the requirement into.
  auto folded = check_requires_dist(
      head + "Requires-Dist: cuda-toolkit==13.0.2\n [[torch.wheel]]\n", "https://i/x.metadata");
  ASSERT_FALSE(folded);
  EXPECT_EQ(folded.error().message,
            "https://i/x.metadata: the METADATA's Requires-Dist 'cuda-toolkit==13.0.2? "
            "[[torch.wheel]]' holds a control character (\\x0a); kiln does not read metadata it "
            "cannot write down as it is");
  for (std::string bad : {"\x1b[2J", "\ry", "\x7f", "\xc2\x9b", "\xe2\x80\xa8"})
    EXPECT_FALSE(check_requires_dist(head + "Requires-Dist: x" + bad + "\n", "u")) << bad;
}

TEST(Requirements, TorchRequirementNamesFromItsWheelInTheDownloadCache) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-torchreq-").value();
  manifest::TorchWheel w{"cp311", "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                         std::string(64, 'a')};
  EXPECT_TRUE(torch_requirement_names(cache::Store(dir.path()), w).empty());  // not downloaded
  fs::path path = layout(cache::Store(dir.path())).download_path(w.sha256, w.file);
  fs::create_directories(path.parent_path());
  auto zip = archive::ZipWriter::create(path).value();
  zip.add("torch-2.11.0.dist-info/METADATA",
          "Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n"
          "Requires-Dist: filelock\n"
          "Requires-Dist: nvidia-cublas-cu12==12.8.4.1; platform_system == \"Linux\"\n"
          "Requires-Dist: Typing_Extensions>=4.10.0\n"
          "Requires-Dist: opt-einsum>=3.3; extra == \"opt-einsum\"\n"
          "\nRequires-Dist: in-the-description\n")
      .value();
  zip.finish().value();
  EXPECT_EQ(
      torch_requirement_names(cache::Store(dir.path()), w),
      (std::set<std::string, std::less<>>{"filelock", "nvidia-cublas-cu12", "typing-extensions"}));
  // A file name that is not one path segment is never looked up.
  w.file = "../torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl";
  EXPECT_TRUE(torch_requirement_names(cache::Store(dir.path()), w).empty());
}

TEST(TomlText, StringsAndCommentsNeverBecomeStructure) {
  for (std::string text :
       {std::string("plain"), std::string("a \"quoted\" \\ text"),
        std::string("line\n[[x]]\ny = 1"), std::string("\x1b[2J\r\x7f\xc2\x9b"),
        std::string("\xff\xfe bad utf-8 \xc0\xaf"), std::string("# ]] [[a.b]] = \"''' x")}) {
    std::string doc = toml_comment(text) + "key = " + toml_string(text) + "\n" + toml_comment(text);
    EXPECT_EQ(std::count(doc.begin(), doc.end(), '\n'), 3) << doc;
    EXPECT_EQ(toml_comment(text).find('\r'), std::string::npos);
  }
  EXPECT_EQ(toml_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
  EXPECT_EQ(toml_string("\xff"), "\"\xef\xbf\xbd\"");
  EXPECT_EQ(toml_comment("x\ny"), "# x\\x0ay\n");
}

TEST(Requirements, ToolkitComponentsOfTheNvccAndCcclExtras) {
  // cuda-toolkit 13.0.2 (torch 2.11, 2.12): the nvcc extra names nvcc alone; crt, nvvm and the
  // runtime have their own extras.
  std::string old = "Name: cuda-toolkit\nVersion: 13.0.2\n";
  for (auto [p, v, extra] : std::vector<std::tuple<const char*, const char*, const char*>>{
           {"nvidia-cuda-nvcc", "13.0.88", "nvcc"},
           {"nvidia-cuda-crt", "13.0.88", "crt"},
           {"nvidia-nvvm", "13.0.88", "nvvm"},
           {"nvidia-cuda-runtime", "13.0.96", "cudart"},
           {"nvidia-cuda-cccl", "13.0.85", "cccl"},
           {"nvidia-cublas", "13.1.0.3", "cublas"}})
    old += cat("Requires-Dist: ", p, "==", v,
               ".*; (sys_platform == 'linux' or sys_platform == "
               "'win32') and extra == '",
               extra, "'\n");
  EXPECT_EQ(toolkit_components(old), (std::vector<Component>{{"nvidia-cuda-cccl", "13.0.85.*"},
                                                             {"nvidia-cuda-crt", "13.0.88.*"},
                                                             {"nvidia-cuda-nvcc", "13.0.88.*"},
                                                             {"nvidia-cuda-runtime", "13.0.96.*"},
                                                             {"nvidia-nvvm", "13.0.88.*"}}));
  auto c = toolkit_components(toolkit_metadata("13.2.86"));
  std::vector<Component> want = {{"nvidia-cuda-cccl", "13.2.86.*"},
                                 {"nvidia-cuda-crt", "13.2.86.*"},
                                 {"nvidia-cuda-nvcc", "13.2.86.*"},
                                 {"nvidia-cuda-runtime", "13.2.86.*"},
                                 {"nvidia-nvvm", "13.2.86.*"}};
  EXPECT_EQ(c, want);
  EXPECT_TRUE(version_matches("13.2.86", "13.2.86.*"));
  EXPECT_TRUE(version_matches("13.2.86.1", "13.2.86.*"));
  EXPECT_FALSE(version_matches("13.2.861", "13.2.86.*"));
  EXPECT_FALSE(version_matches("13.2.8", "13.2.86"));
  EXPECT_TRUE(version_matches("13.0.3.0", "13.0.3"));  // cuda-toolkit's file for torch 2.13's pin
  EXPECT_FALSE(version_matches("13.0.30", "13.0.3"));
  EXPECT_FALSE(version_matches("13.4.0rc1", "13.4.0"));
  EXPECT_TRUE(packaging::version_less("13.2.86", "13.2.100"));
}

fetch::IndexFile file(const std::string& name) {
  return {name, "http://x/" + name, sha256_hex(name), std::nullopt, false, ""};
}

TEST(TorchFiles, OnePerCpythonAbiOnLinuxX86_64) {
  std::vector<fetch::IndexFile> page = {
      file("torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl"),
      file("torch-2.11.0+cu128-cp311-cp311-manylinux_2_28_x86_64.whl"),
      file("torch-2.11.0+cu128-cp313-cp313t-manylinux_2_28_x86_64.whl"),
      file("torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_aarch64.whl"),
      file("torch-2.11.0+cu128-cp312-cp312-win_amd64.whl"),
      file("torch-2.11.0+cu126-cp312-cp312-manylinux_2_28_x86_64.whl"),
      file("torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
      file("torch-2.11.0+cu128-cp312-none-any.whl")};
  auto all = torch_files(page, "2.11.0+cu128", {}).value();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].python_tag, "cp311");
  EXPECT_EQ(all[1].python_tag, "cp312");
  EXPECT_EQ(all[2].python_tag, "cp313t");
  EXPECT_EQ(all[1].file.filename, "torch-2.11.0+cu128-cp312-cp312-manylinux_2_28_x86_64.whl");
  auto one = torch_files(page, "2.11.0+cu128", {"cp312"}).value();
  ASSERT_EQ(one.size(), 1u);
  auto missing = torch_files(page, "2.11.0+cu128", {"cp314"});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("no torch 2.11.0+cu128 wheel for cp314"),
            std::string::npos);
  page[1].sha256.clear();
  EXPECT_FALSE(torch_files(page, "2.11.0+cu128", {}));
}

// A local index: torch 2.15.0 (cp311, cp312, cp314t) with PEP 658 metadata, the cuda-toolkit
// 13.2.2 metapackage as a real wheel, and two releases of each component.
class IndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-init-").value());
    www_ = dir_->path() / "www";
    std::string torch_meta = std::string(kTorch211);
    torch_meta.replace(torch_meta.find("13.0.2"), 6, "13.2.2");
    nlohmann::json files = nlohmann::json::array();
    for (std::string tag : {"cp311-cp311", "cp312-cp312", "cp314-cp314t"}) {
      std::string name = cat("torch-2.15.0-", tag, "-manylinux_2_28_x86_64.whl");
      write_text(www_ / "files" / (name + ".metadata"), torch_meta);
      files.push_back({{"filename", name},
                       {"url", "../../files/" + name},
                       {"hashes", {{"sha256", sha256_hex(name)}}},
                       {"core-metadata", {{"sha256", sha256_hex(torch_meta)}}}});
    }
    page("torch", files);
    fs::path meta_wheel = www_ / "files" / "cuda_toolkit-13.2.2-py2.py3-none-any.whl";
    auto zip = archive::ZipWriter::create(meta_wheel).value();
    zip.add("cuda_toolkit-13.2.2.dist-info/METADATA", toolkit_metadata("13.2.86")).value();
    zip.finish().value();
    std::string bytes = read_file(meta_wheel).value();
    page("cuda-toolkit", {{{"filename", meta_wheel.filename().string()},
                           {"url", "../../files/" + meta_wheel.filename().string()},
                           {"hashes", {{"sha256", sha256_hex(bytes)}}}}});
    for (std::string p : {"nvidia_cuda_nvcc", "nvidia_cuda_crt", "nvidia_nvvm",
                          "nvidia_cuda_runtime", "nvidia_cuda_cccl"})
      component_page(p);
    crt_wheel(15);
    server_.emplace(www_);
  }

  // Two releases of a component, Linux and Windows; the files are never fetched but the crt's.
  void component_page(const std::string& p, const std::string& real_file = "",
                      const std::string& real_sha256 = "") {
    nlohmann::json fs_ = nlohmann::json::array();
    for (std::string v : {"13.2.51", "13.2.86", "13.2.86.1", "13.3.1"})
      for (std::string plat : {"manylinux_2_27_x86_64", "win_amd64"}) {
        std::string name = cat(p, "-", v, "-py3-none-", plat, ".whl");
        fs_.push_back(
            {{"filename", name},
             {"url", "/files/" + name},
             {"hashes", {{"sha256", name == real_file ? real_sha256 : sha256_hex(name)}}}});
      }
    std::string project = p;
    std::replace(project.begin(), project.end(), '_', '-');
    page(project, fs_);
  }

  // The crt wheel kiln picks, real, with a host_config.h that refuses GCC newer than `gcc_max`.
  void crt_wheel(int gcc_max) {
    std::string name = "nvidia_cuda_crt-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl";
    fs::path path = www_ / "files" / name;
    fs::remove(path);
    auto zip = archive::ZipWriter::create(path).value();
    zip.add("nvidia/cu13/include/crt/host_config.h",
            cat("#if defined(__GNUC__)\n#if __GNUC__ > ", gcc_max,
                "\n#error -- unsupported GNU version! gcc versions later than ", gcc_max,
                " are not supported!\n#endif\n#endif\n"))
        .value();
    zip.finish().value();
    component_page("nvidia_cuda_crt", name, sha256_hex(read_file(path).value()));
  }

  void page(const std::string& project, const nlohmann::json& files) {
    write_text(
        www_ / "simple" / project / "index.json",
        nlohmann::json{{"meta", {{"api-version", "1.0"}}}, {"name", project}, {"files", files}}
            .dump());
  }

  IndexRequest request() const {
    IndexRequest r;
    r.torch_version = "2.15.0";
    r.torch_index = r.cuda_index = server_->url("/simple/");
    r.archs = "8.0;9.0;10.0;12.0";
    return r;
  }

  Expected<IndexTarget> run(const IndexRequest& r) {
    cache::Store store(dir_->path() / "cache");
    fetch::Downloader d(*http_, store, false);
    return target_from_index(r, d);
  }

  ScopedEnv no_proxy_{"no_proxy", "127.0.0.1,localhost"};
  std::optional<TempDir> dir_;
  fs::path www_;
  std::optional<HttpServer> server_;
  std::unique_ptr<fetch::HttpClient> http_ = fetch::make_curl_client();
};

TEST_F(IndexTest, WritesAFullyPinnedTargetWithoutDownloadingTorch) {
  IndexTarget t = run(request()).value();
  EXPECT_EQ(t.name, "torch2.15.0-cu132");
  manifest::Target target = manifest::parse_target(t.text, t.name, "t.toml").value();
  ASSERT_EQ(target.torch_wheels.size(), 3u);
  EXPECT_EQ(target.torch_wheels[2].python_tag, "cp314t");
  EXPECT_EQ(target.torch_wheels[0].sha256,
            sha256_hex("torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl"));
  EXPECT_EQ(target.cuda_version, "13.2");
  EXPECT_EQ(target.cuda_toolkit, manifest::ToolkitKind::Wheels);
  EXPECT_EQ(target.archs.canonical(), "sm_80;sm_90;sm_100;sm_120");
  EXPECT_EQ(target.python_interpreter, "python3");
  EXPECT_TRUE(target.torch_index_url.empty());
  // The newest Linux x86_64 wheel of each component within 13.2.86.*.
  std::vector<std::string> wheels;
  for (const auto& w : target.cuda_wheels) wheels.push_back(w.file);
  EXPECT_EQ(wheels, (std::vector<std::string>{
                        "nvidia_cuda_cccl-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl",
                        "nvidia_cuda_crt-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl",
                        "nvidia_cuda_nvcc-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl",
                        "nvidia_cuda_runtime-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl",
                        "nvidia_nvvm-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl"}));
  EXPECT_NE(t.text.find("cuda-toolkit[cublas"), std::string::npos);  // where CUDA was read
  // The host compilers, from the crt wheel's host_config.h.
  EXPECT_NE(t.text.find("# Compiler: NVIDIA's CUDA 13.2.2 wheels; its nvcc takes g++ 7 to 15 as "
                        "host compiler.\n"),
            std::string::npos)
      << t.text;
  // No torch wheel was requested: its metadata came through PEP 658.
  EXPECT_EQ(read_file(www_.parent_path() / "www.log").value().find("manylinux_2_28_x86_64.whl\""),
            std::string::npos);
}

TEST_F(IndexTest, NarrowsPythonsAndPinsTheIndexGiven) {
  IndexRequest r = request();
  r.python_tags = {"cp312"};
  r.write_index = true;
  r.name = "mine";
  IndexTarget t = run(r).value();
  manifest::Target target = manifest::parse_target(t.text, t.name, "t.toml").value();
  EXPECT_EQ(t.name, "mine");
  ASSERT_EQ(target.torch_wheels.size(), 1u);
  EXPECT_EQ(target.python_version, "3.12");
  EXPECT_EQ(target.torch_index_url, server_->url("/simple/"));
}

TEST_F(IndexTest, WarnsOfAHostCompilerTheToolkitRefuses) {
  auto gxx = toolchain::probe_compiler("g++");
  if (!gxx) GTEST_SKIP() << "no g++ on PATH";
  int major = std::atoi(gxx->version.c_str());
  if (major <= 7) GTEST_SKIP() << "g++ " << gxx->version << " is older than any CUDA 13 limit";
  crt_wheel(major - 1);  // a toolkit that stops just before this machine's g++
  std::string range = cat("7 to ", major - 1);
  ::testing::internal::CaptureStderr();
  IndexTarget t = run(request()).value();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(t.text.find(cat("takes g++ ", range, " as host compiler")), std::string::npos)
      << t.text;
  EXPECT_NE(err.find(cat("kiln: warning: host compiler g++ ", gxx->version, " (", gxx->path,
                         ") is outside the GCC versions CUDA 13.2 supports (", range,
                         ", from "
                         "nvidia_cuda_crt-13.2.86.1-py3-none-manylinux_2_27_x86_64.whl:nvidia/"
                         "cu13/include/crt/host_config.h): install a g++ in that range")),
            std::string::npos)
      << err;
}

TEST_F(IndexTest, RefusesWhatTheToolkitCannotBuild) {
  IndexRequest r = request();
  r.archs = "7.0;9.0";
  auto t = run(r);
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("CUDA 13.2 no longer builds sm_70"), std::string::npos)
      << t.error().message;
  r.archs = "9.0";
  r.torch_version = "2.15.1";
  auto missing = run(r);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("has no torch 2.15.1 wheel"), std::string::npos);
  r.torch_version = "2.15.0\"\n[x]";
  EXPECT_EQ(run(r).error().kind, ErrorKind::BadInput);
}

TEST_F(IndexTest, MetadataThatDisagreesWithItsHashIsRefused) {
  write_text(www_ / "files" / "torch-2.15.0-cp311-cp311-manylinux_2_28_x86_64.whl.metadata",
             "Name: torch\nRequires-Dist: cuda-toolkit==12.9.1\n");
  auto t = run(request());
  ASSERT_FALSE(t);
  EXPECT_NE(t.error().message.find("does not match the sha256"), std::string::npos);
}

}  // namespace kiln::init
