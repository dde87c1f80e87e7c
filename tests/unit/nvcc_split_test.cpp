#include "compile/nvcc_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "core/fs.h"
#include "core/process.h"

namespace kiln::compile::nvcc {

namespace {

bool contains(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

// The CUDA toolkit's nvcc, or empty (the tests that run it are then skipped).
fs::path find_nvcc() {
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* home = std::getenv(var); home && fs::exists(fs::path(home) / "bin" / "nvcc"))
      return fs::path(home) / "bin" / "nvcc";
  if (fs::exists("/usr/local/cuda/bin/nvcc")) return "/usr/local/cuda/bin/nvcc";
  return find_program("nvcc");
}

class RealNvcc : public ::testing::Test {
 protected:
  void SetUp() override {
    nvcc_ = find_nvcc();
    if (nvcc_.empty()) GTEST_SKIP() << "no nvcc";
    dir_ =
        std::make_unique<TempDir>(TempDir::create(fs::temp_directory_path(), "kiln-nvcc-").value());
    write_file_atomic(dir_->path() / "k.cu",
                      "namespace { __global__ void k(int* p) { *p = 1; } }\n"
                      "void launch(int* p) { k<<<1, 1>>>(p); }\n")
        .value();
    auto list = run_capture({nvcc_.string(), "--list-gpu-arch"});
    ASSERT_TRUE(list);
    arch_list_ = arch_list_value(*list);
  }
  DryRun dry_run(std::vector<std::string> args) {
    std::vector<std::string> argv = {nvcc_.string(), "--dryrun"};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessSpec spec;
    spec.argv = argv;
    spec.cwd = dir_->path();
    auto r = run_process(spec);
    EXPECT_TRUE(r && r->ok());
    return parse_dryrun(r ? r->output : "").value();
  }
  DevicePart device(const std::string& name, const std::vector<std::string>& gencodes) {
    fs::path keep = dir_->path() / name;
    fs::create_directories(keep);
    std::vector<std::string> args = {"--fatbin",   (dir_->path() / "k.cu").string(),
                                     "-o",         (keep / "k.fatbin").string(),
                                     "--keep",     "--keep-dir",
                                     keep.string()};
    args.insert(args.end(), gencodes.begin(), gencodes.end());
    return device_part(dry_run(args), arch_list_).value();
  }
  fs::path nvcc_;
  std::unique_ptr<TempDir> dir_;
  std::string arch_list_;
};

}  // namespace

TEST(NvccDryRun, SplitsWordsLikeAShellAndExpandsNvccsVariables) {
  Env vars = {{"CICC_PATH", "/cuda/nvvm/bin"}};
  auto words =
      shell_words(
          R"("/usr/bin"/g++ -I"/a b" -D "V=\"0.1 a\"" "$CICC_PATH/cicc" --cmdline="-v  -x " ${CICC_PATH} 'q r')",
          vars)
          .value();
  EXPECT_EQ(words, (std::vector<std::string>{"/usr/bin/g++", "-I/a b", "-D", "V=\"0.1 a\"",
                                             "/cuda/nvvm/bin/cicc", "--cmdline=-v  -x ",
                                             "/cuda/nvvm/bin", "q r"}));
  // What only a shell could make sense of is refused (kiln then lets nvcc run the file).
  EXPECT_FALSE(shell_words("g++ -D \"D=$HOME\"", vars));
  EXPECT_FALSE(shell_words("g++ a\\ b", vars));
  EXPECT_FALSE(shell_words("g++ `date`", vars));
  EXPECT_FALSE(shell_words("g++ \"unterminated", vars));
  EXPECT_FALSE(shell_words("g++ *.cu", vars));
}

TEST(NvccDryRun, ParsesEnvironmentLinesAndFindsPrograms) {
  auto run = parse_dryrun(
                 "#$ _SPACE_= \n#$ PATH=/nonexistent:/bin:/usr/bin\n#$ CICC_PATH=/cuda/nvvm/bin\n"
                 "#$ \"$CICC_PATH/cicc\" -arch compute_90 \"x.ii\" -o \"x.ptx\"\n#$ sh -c "
                 "true\nnot a command\n")
                 .value();
  ASSERT_EQ(run.env.size(), 3u);
  EXPECT_EQ(run.env[1],
            (std::pair<std::string, std::string>{"PATH", "/nonexistent:/bin:/usr/bin"}));
  ASSERT_EQ(run.commands.size(), 2u);
  EXPECT_EQ(run.commands[0][0], "/cuda/nvvm/bin/cicc");
  EXPECT_TRUE(run.commands[1][0] == "/bin/sh" || run.commands[1][0] == "/usr/bin/sh")
      << run.commands[1][0];
  EXPECT_FALSE(parse_dryrun("#$ PATH=/nonexistent\n#$ ptxas -arch=sm_90 x.ptx\n"));
  EXPECT_FALSE(parse_dryrun("nvcc fatal : Unknown option\n"));
}

TEST(NvccDryRun, ArchListHoldsEveryArchOnce) {
  EXPECT_EQ(arch_list_value(
                "compute_75\ncompute_90\ncompute_90a\ncompute_100f\ncompute_120\ncompute_100\n"),
            "750,900,1000,1200");
  EXPECT_EQ(arch_list_value("nvcc fatal : Unknown option '--list-gpu-arch'\n"), "");
  std::vector<std::string> argv = {
      "g++", "-D__CUDA_ARCH__=900",   "-D__CUDA_ARCH_LIST__=900,1200", "-E",
      "-D",  "__CUDA_ARCH_LIST__=900"};
  EXPECT_TRUE(set_arch_list(argv, "750,900"));
  EXPECT_EQ(argv[2], "-D__CUDA_ARCH_LIST__=750,900");
  EXPECT_EQ(argv[5], "__CUDA_ARCH_LIST__=750,900");
  EXPECT_EQ(argv[1], "-D__CUDA_ARCH__=900");
  std::vector<std::string> none = {"g++", "-c", "x.cpp"};
  EXPECT_FALSE(set_arch_list(none, "750"));
}

TEST_F(RealNvcc, DevicePartOfOneArchIsPreprocessCiccPtxas) {
  DevicePart d = device("sm_90", {"-gencode=arch=compute_90,code=sm_90"});
  ASSERT_EQ(d.steps.size(), 3u);
  EXPECT_EQ(classify(d.steps[0]), Step::DevicePreprocess);
  EXPECT_EQ(classify(d.steps[1]), Step::Cicc);
  EXPECT_EQ(classify(d.steps[2]), Step::Ptxas);
  EXPECT_TRUE(contains(d.steps[0], "-D__CUDA_ARCH_LIST__=" + arch_list_));
  EXPECT_TRUE(contains(d.steps[1], "--gen_module_id_file"));
  ASSERT_EQ(d.images.size(), 1u);
  EXPECT_EQ(d.images[0].kind, "elf");
  EXPECT_EQ(d.images[0].sm, "90");
  EXPECT_EQ(d.stub.parent_path(), dir_->path() / "sm_90");

  DevicePart ptx_only = device("compute_120", {"-gencode=arch=compute_120,code=compute_120"});
  // nvcc still runs ptxas on PTX it only embeds (a check, with no output); so does kiln.
  ASSERT_EQ(ptx_only.steps.size(), 3u);
  EXPECT_FALSE(contains(ptx_only.steps[2], "-o"));
  ASSERT_EQ(ptx_only.images.size(), 1u);
  EXPECT_EQ(ptx_only.images[0].kind, "ptx");
}

TEST_F(RealNvcc, HostPartEmbedsTheDevicePartsImages) {
  DevicePart d90 = device("sm_90", {"-gencode=arch=compute_90,code=sm_90"});
  DevicePart d120 = device("sm_120-ptx", {"-gencode=arch=compute_120,code=sm_120",
                                          "-gencode=arch=compute_120,code=compute_120"});
  EXPECT_EQ(d120.images.size(), 2u);
  fs::path keep = dir_->path() / "host";
  fs::create_directories(keep);
  DryRun all = dry_run(
      {"-c", (dir_->path() / "k.cu").string(), "-o", (dir_->path() / "k.o").string(),
       "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_120,code=sm_120",
       "-gencode=arch=compute_120,code=compute_120", "--keep", "--keep-dir", keep.string()});
  std::vector<Image> images = d90.images;
  images.insert(images.end(), d120.images.begin(), d120.images.end());
  HostPart h = host_part(all, arch_list_, images, {"--compress-mode=size"}).value();
  ASSERT_EQ(h.steps.size(), 3u);
  EXPECT_EQ(classify(h.steps[0]), Step::HostPreprocess);
  EXPECT_EQ(classify(h.steps[1]), Step::Cudafe);
  EXPECT_EQ(classify(h.steps[2]), Step::HostCompile);
  EXPECT_EQ(classify(h.fatbinary), Step::Fatbinary);
  EXPECT_TRUE(contains(h.steps[0], "-D__CUDA_ARCH_LIST__=" + arch_list_));
  EXPECT_FALSE(contains(h.steps[1], "--gen_module_id_file"));  // it reads the device parts' id
  for (const auto& im : images)
    EXPECT_TRUE(contains(
        h.fatbinary, "--image3=kind=" + im.kind + ",sm=" + im.sm + ",file=" + im.file.string()));
  EXPECT_EQ(h.fatbinary.back(), "--compress-mode=size");
  // The fat binary is a file of its own; the host compile includes kiln's reference instead.
  EXPECT_TRUE(contains(h.fatbinary, "--create=" + h.fatbin.string()));
  for (const auto& w : h.fatbinary) EXPECT_EQ(w.find("--embedded-fatbin"), std::string::npos) << w;
  EXPECT_EQ(h.fatbin_source.parent_path(), keep);
  EXPECT_EQ(h.stub.parent_path(), keep);
  EXPECT_EQ(h.module_id.parent_path(), keep);

  // Every image nvcc would embed must come from a device part, and nothing else.
  std::vector<Image> missing = d90.images;
  missing.push_back(d120.images.front());
  auto r = host_part(all, arch_list_, missing, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no device part made the"), std::string::npos)
      << r.error().message;
  std::vector<Image> extra = images;
  extra.push_back(Image{"elf", "100", "/x.cubin"});
  EXPECT_FALSE(host_part(all, arch_list_, extra, {}));
}

namespace {
std::string read(const fs::path& p) {
  return read_file(p).value();
}
void run_steps(const std::vector<std::vector<std::string>>& steps, const fs::path& cwd,
               const std::vector<std::string>& prefix = {}) {
  for (const auto& argv : steps) {
    ProcessSpec spec;
    spec.argv = prefix;
    spec.argv.insert(spec.argv.end(), argv.begin(), argv.end());
    spec.cwd = cwd;
    auto r = run_process(spec);
    ASSERT_TRUE(r && r->ok()) << argv[0] << ": " << (r ? r->output : r.error().message);
  }
}
// The module id ends in the front end's process id: the builder runs nvcc's steps in PID
// namespaces of their own, where the ids are the same on every run; so does the test.
std::vector<std::string> pid_namespace() {
  ProcessSpec probe;
  probe.argv = {"unshare", "--pid", "--fork", "--kill-child", "--", "true"};
  probe.output = ProcessSpec::Output::Discard;
  auto r = run_process(probe);
  if (r && r->ok()) return {"unshare", "--pid", "--fork", "--kill-child", "--"};
  return {};
}
}  // namespace

TEST_F(RealNvcc, FrontEndAtO0WritesTheOptimizingPassesStub) {
  DevicePart d = device("sm_90", {"-gencode=arch=compute_90,code=sm_90"});
  fs::path keep = dir_->path() / "front";
  fs::create_directories(keep);
  DevicePart f =
      front_end_part(dry_run({"-Xcicc", "-O0", "--fatbin", (dir_->path() / "k.cu").string(), "-o",
                              (keep / "k.fatbin").string(), "-gencode=arch=compute_90,code=sm_90",
                              "--keep", "--keep-dir", keep.string()}),
                     arch_list_)
          .value();
  ASSERT_EQ(f.steps.size(), 2u);
  EXPECT_EQ(classify(f.steps[1]), Step::Cicc);
  EXPECT_TRUE(f.images.empty());
  EXPECT_EQ(f.stub.parent_path(), keep);
  std::vector<std::string> prefix = pid_namespace();
  if (prefix.empty()) GTEST_SKIP() << "cannot run in a PID namespace (unshare --pid)";
  run_steps(d.steps, dir_->path(), prefix);
  run_steps(f.steps, dir_->path(), prefix);
  EXPECT_EQ(read(f.module_id), read(d.module_id));
  EXPECT_TRUE(same_stub(read(f.stub), read(d.stub)));
  EXPECT_NE(read(f.stub).find("__cudaRegisterEntry"), std::string::npos);
  // Without -O0 it is not a front end.
  EXPECT_FALSE(front_end_part(
      dry_run({"--fatbin", (dir_->path() / "k.cu").string(), "-o", (keep / "k.fatbin").string(),
               "-gencode=arch=compute_90,code=sm_90", "--keep", "--keep-dir", keep.string()}),
      arch_list_));
}

TEST_F(RealNvcc, HostAndFatBinaryObjectsLinkIntoOneModule) {
  DevicePart d = device("sm_90", {"-gencode=arch=compute_90,code=sm_90"});
  run_steps(d.steps, dir_->path());
  fs::path keep = dir_->path() / "host";
  fs::create_directories(keep);
  DryRun all = dry_run({"-Xcompiler", "-fPIC", "-c", (dir_->path() / "k.cu").string(), "-o",
                        (dir_->path() / "k.o").string(), "-gencode=arch=compute_90,code=sm_90",
                        "--keep", "--keep-dir", keep.string()});
  HostPart h = host_part(all, arch_list_, d.images, {}).value();
  write_file_atomic(h.module_id, read(d.module_id)).value();
  write_file_atomic(h.stub, read(d.stub)).value();
  write_file_atomic(h.fatbin_source, fatbin_reference("__kiln_fatbin_k")).value();
  run_steps(h.steps, dir_->path());
  run_steps({h.fatbinary}, dir_->path());
  write_file_atomic(dir_->path() / "fatbin.s", fatbin_assembly("__kiln_fatbin_k", h.fatbin))
      .value();
  fs::path cxx = find_program("g++");
  if (cxx.empty()) GTEST_SKIP() << "no g++";
  run_steps({{cxx.string(), "-c", (dir_->path() / "fatbin.s").string(), "-o",
              (dir_->path() / "fatbin.o").string()},
             {cxx.string(), "-shared", (dir_->path() / "k.o").string(),
              (dir_->path() / "fatbin.o").string(), "-o", (dir_->path() / "k.so").string()}},
            dir_->path());
  // The module's .nv_fatbin holds the fat binary byte for byte; the symbol stays inside it.
  std::string so = read(dir_->path() / "k.so");
  std::string fatbin = read(h.fatbin);
  EXPECT_NE(so.find(fatbin), std::string::npos);
  auto nm = run_capture({"nm", "-D", (dir_->path() / "k.so").string()});
  ASSERT_TRUE(nm);
  EXPECT_EQ(nm->find("__kiln_fatbin_k"), std::string::npos) << *nm;
  auto all_symbols = run_capture({"nm", (dir_->path() / "k.so").string()});
  ASSERT_TRUE(all_symbols);
  EXPECT_NE(all_symbols->find("__kiln_fatbin_k"), std::string::npos);
  // The wrapper the stub registers (.nvFatBinSegment: magic, version, data pointer) points at the
  // fat binary's first byte once the loader applies its relocation.
  auto sections = run_capture({"readelf", "-SW", (dir_->path() / "k.so").string()});
  auto relocations = run_capture({"readelf", "-rW", (dir_->path() / "k.so").string()});
  if (!sections || !relocations) GTEST_SKIP() << "no readelf";
  // Address and file offset of a section.
  auto where = [&](const std::string& name) -> std::pair<std::uint64_t, std::uint64_t> {
    std::size_t at = sections->find(" " + name + " ");
    if (at == std::string::npos) return {0, 0};
    std::istringstream line(sections->substr(at + name.size() + 2));
    std::string type, addr, off;
    line >> type >> addr >> off;
    return {std::stoull(addr, nullptr, 16), std::stoull(off, nullptr, 16)};
  };
  auto [segment, segment_offset] = where(".nvFatBinSegment");
  auto [data, data_offset] = where(".nv_fatbin");
  ASSERT_NE(segment, 0u);
  ASSERT_NE(data, 0u);
  EXPECT_EQ(so.find(fatbin), data_offset);  // the fat binary is the section's first byte
  EXPECT_EQ(so.substr(segment_offset, 4),
            std::string("\xb1\x43\x62\x46", 4));  // the wrapper's magic
  std::uint64_t pointer = 0;
  std::istringstream rela(*relocations);
  for (std::string line; std::getline(rela, line);) {
    std::istringstream words(line);
    std::string offset, info, type, addend;
    if (!(words >> offset >> info >> type >> addend) || type != "R_X86_64_RELATIVE") continue;
    if (std::stoull(offset, nullptr, 16) == segment + 8) pointer = std::stoull(addend, nullptr, 16);
  }
  EXPECT_EQ(pointer, data) << *sections << *relocations;
}

TEST_F(RealNvcc, RelocatableDeviceCodeIsNotSplit) {
  fs::path keep = dir_->path() / "rdc";
  fs::create_directories(keep);
  DryRun d = dry_run({"-rdc=true", "--fatbin", (dir_->path() / "k.cu").string(), "-o",
                      (keep / "k.fatbin").string(), "-gencode=arch=compute_90,code=sm_90", "--keep",
                      "--keep-dir", keep.string()});
  auto r = device_part(d, arch_list_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("-rdc"), std::string::npos);
}

TEST(SameStub, OnlyTheNumberingOfTemporariesMayDiffer) {
  // sm_75's pass of causal-conv1d's backward file numbers the callback's parameter one higher.
  std::string sm90 =
      "static void __nv_cudaEntityRegisterCallback(void **__T681){__nv_dummy_param_ref(__T681);"
      "__cudaRegisterEntry(__T681, k, _Z1kv, 128);}";
  std::string sm75 = sm90;
  for (std::size_t p; (p = sm75.find("__T681")) != std::string::npos;) sm75.replace(p, 6, "__T682");
  EXPECT_TRUE(same_stub(sm90, sm75));
  EXPECT_TRUE(same_stub(sm90, sm90));
  // Anything else is a different stub: another kernel, another name that merely ends in __T<n>.
  std::string other_kernel = sm90;
  other_kernel.replace(other_kernel.find("_Z1kv"), 5, "_Z1jv");
  EXPECT_FALSE(same_stub(sm90, other_kernel));
  EXPECT_FALSE(same_stub("int x__T1;", "int x__T2;"));
  // Line markers naming the stub itself name each pass's directory.
  std::string a = "void f()\n# 1 \"/keep/sm_90/k.cudafe1.stub.c\"\nstatic void g();\n";
  std::string b = "void f()\n# 1 \"/keep/sm_120/k.cudafe1.stub.c\"\nstatic void g();\n";
  EXPECT_TRUE(same_stub(a, b));
  EXPECT_FALSE(same_stub(a, "void f()\n# 1 \"/keep/sm_90/k.cu\"\nstatic void g();\n"));
  EXPECT_EQ(moved_stub(a, "/keep/sm_90/k.cudafe1.stub.c", "/keep/sm_120/k.cudafe1.stub.c"), b);
  EXPECT_EQ(moved_stub(sm90, "/keep/sm_90/k.cudafe1.stub.c", "/x"), sm90);
  EXPECT_FALSE(same_stub("__T1", "__T1x"));
}

}  // namespace kiln::compile::nvcc
