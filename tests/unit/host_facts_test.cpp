#include "toolchain/host.h"

#include <gnu/libc-version.h>
#include <gtest/gtest.h>

#include "core/fs.h"

namespace kiln::toolchain {

// This machine's facts, each checked against another way of asking.
TEST(HostFacts, TheLinkerTheCLibraryAndTheHeadersOfThisHost) {
  HostCompiler cxx = probe_compiler("g++").value();
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-host-").value();
  write_file_atomic(dir.path() / "include" / "cuda.h", "#define CUDA_VERSION 13000\n").value();
  CudaToolkit cuda;
  cuda.home = dir.path();
  HostFacts facts = probe_host_facts(cxx, cuda).value();
  EXPECT_TRUE(facts.ld.starts_with("GNU ld")) << facts.ld;
  EXPECT_EQ(facts.ld.find('\n'), std::string::npos);
  EXPECT_EQ(facts.glibc, gnu_get_libc_version());
  EXPECT_EQ(facts.cuda_include, tree_sha256(dir.path() / "include").value());
  // A header changed is another digest; a toolkit without include/ records none.
  write_file_atomic(dir.path() / "include" / "cuda.h", "#define CUDA_VERSION 13010\n").value();
  EXPECT_NE(probe_host_facts(cxx, cuda).value().cuda_include, facts.cuda_include);
  fs::remove_all(dir.path() / "include");
  EXPECT_EQ(probe_host_facts(cxx, cuda).value().cuda_include, "");
}

TEST(HostFacts, ACompilerWhoseLinkerIsMissingIsAnError) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-host-").value();
  // A "compiler" that names a linker nobody has.
  write_file_atomic(dir.path() / "cc", "#!/bin/sh\necho kiln-no-such-linker\n", 0755).value();
  HostCompiler cxx{"cc", (dir.path() / "cc").string(), "1", "cc 1"};
  CudaToolkit cuda;
  cuda.home = dir.path();
  auto facts = probe_host_facts(cxx, cuda);
  ASSERT_FALSE(facts);
  EXPECT_NE(facts.error().message.find("kiln-no-such-linker"), std::string::npos)
      << facts.error().message;
}

}  // namespace kiln::toolchain
