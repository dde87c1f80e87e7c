// The torch sysroot's text matchers: the strings version.py assigns, the pybind11 ABI key of
// libtorch_python. Both were std::regex searches; the hand-written ones agree with them on short
// texts and never recurse on long ones.
#include "toolchain/torch.h"

#include <gtest/gtest.h>

#include <regex>

namespace kiln::toolchain {

TEST(TorchText, PyStringVarAgreesWithTheRegularExpressionItReplaced) {
  auto old = [](const std::string& text, const std::string& name) {
    std::regex re(name + R"(\s*(?::\s*[A-Za-z_\[\]\. ]+)?=\s*['"]([^'"]*)['"])");
    std::smatch m;
    return std::regex_search(text, m, re) ? m[1].str() : std::string();
  };
  for (std::string text : {"__version__ = '2.11.0+cu130'\n",
                           "__version__: str = \"2.11.0\"\n",
                           "cuda: Optional[str] = '13.0'\n",
                           "cuda = None\ncuda = '12.8'\n",
                           "cuda: = '1'",
                           "cuda:= '1'",
                           "cuda:\t= '1'",
                           "cuda :  str  = '1'",
                           "cuda: typing.Optional[str] = '13.0'",
                           "cuda: Optional[str]\t= '1'",
                           "cuda: 'x' = '1'",
                           "cuda = \"1'",
                           "cuda = '1",
                           "cuda = ''",
                           "cuda=\n'1'",
                           "cuda\n=\n\"1\"",
                           "git_cuda = 'x'",
                           "cudacuda = 'y'",
                           "cuda: int",
                           "cuda: a:b = '1'",
                           "cuda: Optional[str] = None\nhip = '6'\ncuda = '13.0'",
                           "__version__ = '1'\n__version__ = '2'",
                           "",
                           "cuda",
                           "cuda:",
                           "cuda: x = 1",
                           "cuda = \"a'b\""}) {
    EXPECT_EQ(py_string_var(text, "__version__"), old(text, "__version__")) << "'" << text << "'";
    EXPECT_EQ(py_string_var(text, "cuda"), old(text, "cuda")) << "'" << text << "'";
  }
  const std::string mb(1 << 20, 'x');
  EXPECT_EQ(py_string_var("cuda = '" + mb + "'", "cuda"), mb);
  EXPECT_EQ(py_string_var("cuda: " + std::string(1 << 20, ' ') + "= '1'", "cuda"), "1");
  EXPECT_EQ(py_string_var("cuda: " + mb + " '1'", "cuda"), "");
}

TEST(TorchText, PybindKeyAgreesWithTheRegularExpressionItReplaced) {
  const std::regex key(R"(__pybind11_internals_v\d+_([a-z]+)_([a-z]+)_(cxxabi\d+)__)");
  for (std::string text :
       {std::string(2, '\0') + "__pybind11_internals_v4_gcc_libstdcpp_cxxabi1011__" +
            std::string(1, '\0'),
        std::string("__pybind11_internals_v_gcc_libstdcpp_cxxabi1011__"),
        std::string("__pybind11_internals_v4_gcc_cxxabi1011__"),
        std::string("__pybind11_internals_v4_gcc_libstdcpp_cxxabi__"),
        std::string("__pybind11_internals_v4_gcc_libstdcpp_cxxabi1011_"),
        std::string("__pybind11_internals_v4_GCC_libstdcpp_cxxabi1011__"),
        std::string("__pybind11_internals_v4_gcc_lib2_cxxabi1011__"),
        std::string(
            "__pybind11_internals_v4_gcc__pybind11_internals_v10_clang_libcpp_cxxabi1002__"),
        std::string("__pybind11_internals_v4_gcc_cxxabi_cxxabi1011___"), std::string()}) {
    std::smatch m;
    std::vector<std::string> want;
    if (std::regex_search(text, m, key))
      want = {"-DPYBIND11_COMPILER_TYPE=\"_" + m[1].str() + "\"",
              "-DPYBIND11_STDLIB=\"_" + m[2].str() + "\"",
              "-DPYBIND11_BUILD_ABI=\"_" + m[3].str() + "\""};
    EXPECT_EQ(pybind_abi_defines(text), want) << "'" << text << "'";
  }
  const std::string mb(1 << 20, 'a');
  EXPECT_EQ(pybind_abi_defines("__pybind11_internals_v4_" + mb + "_" + mb + "_cxxabi1011__").size(),
            3u);
  EXPECT_TRUE(pybind_abi_defines("__pybind11_internals_v4_" + mb).empty());
}

TEST(TorchText, TheStandardCppExtensionCompilesWith) {
  // Lines of torch 2.11's and 2.15's cpp_extension.py.
  std::string t211 =
      "        cuda_cflags = ['-std=c++17']\n    common_cflags += ['-std=c++17', '-fPIC']\n";
  std::string t215 =
      "                cuda_cflags = ['-std=c++20']\n    common_cflags += ['-std=c++20', "
      "'-fPIC']\n";
  EXPECT_EQ(cpp_extension_std(t211, "common_cflags += ['-std="), "c++17");
  EXPECT_EQ(cpp_extension_std(t215, "common_cflags += ['-std="), "c++20");
  EXPECT_EQ(cpp_extension_std(t215, "cuda_cflags = ['-std="), "c++20");
  EXPECT_EQ(cpp_extension_std("common_cflags += ['-std=gnu++2a']", "common_cflags += ['-std="), "");
  EXPECT_EQ(cpp_extension_std("common_cflags += ['-std=c++1", "common_cflags += ['-std="), "");
  EXPECT_EQ(cpp_extension_std("", "cuda_cflags = ['-std="), "");
}

}  // namespace kiln::toolchain
