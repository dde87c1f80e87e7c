#include "compile/setuptools.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

// The wrapper drops what makes nvcc's output depend on timing (--threads, --split-compile, in
// every spelling), keeps the rest in order, and names the intermediates after the object.
TEST(Setuptools, NvccWrapperDropsThreads) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-wrapper-").value();
  const fs::path fake = dir.path() / "nvcc", args = dir.path() / "args";
  write_file_atomic(fake, cat("#!/bin/sh\nprintf '%s\\n' \"$@\" > ", args.string(), "\n"), 0755)
      .value();
  const fs::path wrapper = dir.path() / "wrapper";
  write_file_atomic(wrapper, nvcc_wrapper(fake, false, {}), 0755).value();
  const fs::path obj = dir.path() / "a.o";
  run_capture({wrapper.string(), "-O3", "--threads", "4", "-t2", "-lineinfo", "-t", "8",
               "--threads=3", "--split-compile", "2", "-split-compile=4", "-c", "a b.cu", "-o",
               obj.string()})
      .value();
  EXPECT_EQ(split(read_file(args).value(), "\n"),
            (std::vector<std::string>{"-O3", "-lineinfo", "-c", "a b.cu", "-o", obj.string(),
                                      "--keep", "--keep-dir", obj.string() + ".keep"}));
  EXPECT_TRUE(fs::is_directory(obj.string() + ".keep"));
  // In a sandbox: nvcc in a user and PID namespace of its own where the kernel allows one (here:
  // the arguments arrive the same), else as it is, with the marker left for the caveat.
  const fs::path marker = dir.path() / "outside";
  write_file_atomic(wrapper, nvcc_wrapper(fake, true, marker), 0755).value();
  run_capture({wrapper.string(), "-c", "x.cu", "-o", obj.string()}).value();
  EXPECT_EQ(split(read_file(args).value(), "\n"),
            (std::vector<std::string>{"-c", "x.cu", "-o", obj.string(), "--keep", "--keep-dir",
                                      obj.string() + ".keep"}));
  std::string text = read_file(wrapper).value();
  EXPECT_NE(text.find("if ! unshare --user --map-root-user --pid --fork --kill-child -- true"),
            std::string::npos)
      << text;
  const fs::path stub = dir.path() / "bin";
  write_file_atomic(stub / "unshare", "#!/bin/sh\nexit 1\n", 0755).value();
  run_capture({"env", cat("PATH=", stub.string(), ":/usr/bin:/bin"), wrapper.string(), "-c", "y.cu",
               "-o", obj.string()})
      .value();
  EXPECT_TRUE(fs::exists(marker));
  EXPECT_EQ(split(read_file(args).value(), "\n").at(1), "y.cu");
}

TEST(Setuptools, TorchCudaArchList) {
  using manifest::ArchList;
  EXPECT_EQ(torch_cuda_arch_list(ArchList::parse("sm_90 12.0+PTX").value()).value(),
            "9.0;12.0+PTX");
  EXPECT_EQ(torch_cuda_arch_list(ArchList::parse("90a-real").value()).value(), "9.0a");
  // What TORCH_CUDA_ARCH_LIST cannot say is refused, not widened.
  auto ptx = torch_cuda_arch_list(ArchList::parse("compute_90").value());
  ASSERT_FALSE(ptx);
  EXPECT_NE(ptx.error().message.find("cannot build PTX alone (compute_90)"), std::string::npos);
  EXPECT_NE(ptx.error().message.find("use 9.0+PTX"), std::string::npos);
  auto f = torch_cuda_arch_list(ArchList::parse("100f-real").value());
  ASSERT_FALSE(f);
  EXPECT_NE(f.error().message.find("no 'f' variants"), std::string::npos);
}

TEST(Setuptools, NinjaLog) {
  // ninja's log: start and end in milliseconds, mtime, output, command hash; a rerun's line wins.
  const std::string log =
      "# ninja log v5\n"
      "0\t1500\t0\t/r/src/build/temp/csrc/a.o\tdeadbeef\n"
      "3\t20250\t0\t/r/src/build/temp/csrc/b.o\tfeedface\n"
      "malformed line\n"
      "100\t600\t0\t/r/src/build/temp/csrc/a.o\tdeadbeef\n";
  auto steps = parse_ninja_log(log);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].first, "/r/src/build/temp/csrc/a.o");
  EXPECT_DOUBLE_EQ(steps[0].second, 0.5);
  EXPECT_DOUBLE_EQ(steps[1].second, 20.247);
  EXPECT_TRUE(parse_ninja_log("").empty());
}

}  // namespace kiln::compile
