#include "manifest/build_env.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/fs.h"
#include "manifest/repository.h"

namespace kiln::manifest {

namespace {

const std::string kSha(64, 'a');

std::string pins_text(const std::string& tools) {
  return tools +
         "\n[[torch-runtime]]\ntorch = \"2.11.0\"\n\n[[torch-runtime.wheel]]\nproject = "
         "\"nvidia-cublas\"\n"
         "file = \"nvidia_cublas-13.1.0.3-py3-none-manylinux_2_27_x86_64.whl\"\nsha256 = \"" +
         kSha + "\"\n";
}

std::string tool(const std::string& project, const std::string& file) {
  return "[[tool]]\nproject = \"" + project + "\"\nfile = \"" + file + "\"\nsha256 = \"" + kSha +
         "\"\n";
}

std::string build_env_error(const std::string& text) {
  auto p = parse_build_env(text, "tools/setuptools-env.toml");
  return p ? std::string("<no error>") : p.error().message;
}

}  // namespace

TEST(BuildEnv, ParsesWithPipFirst) {
  auto pins = parse_build_env(pins_text(tool("setuptools", "setuptools-80.9.0-py3-none-any.whl") +
                                        tool("pip", "pip-25.3-py3-none-any.whl")),
                              "x")
                  .value();
  ASSERT_EQ(pins.tools.size(), 2u);
  EXPECT_EQ(pins.tools[0].project, "pip");  // it installs the rest
  ASSERT_NE(pins.runtime_for("2.11.0"), nullptr);
  EXPECT_EQ(pins.runtime_for("2.11.0")->size(), 1u);
  EXPECT_EQ(pins.runtime_for("2.10.0"), nullptr);
  // A torch from an environment needs no runtime wheels: they are not part of its identity.
  EXPECT_TRUE(pins.identity("2.11.0").contains("torch_runtime"));
  EXPECT_FALSE(pins.identity("").contains("torch_runtime"));
  EXPECT_NE(pins.identity("2.11.0"), pins.identity(""));
}

TEST(BuildEnv, BadInput) {
  std::string pip = tool("pip", "pip-25.3-py3-none-any.whl");
  EXPECT_NE(build_env_error(pins_text(tool("setuptools", "setuptools-80.9.0-py3-none-any.whl")))
                .find("must include pip"),
            std::string::npos);
  EXPECT_NE(build_env_error(pip + tool("ninja", "ninja-1.13.0.tar.gz"))
                .find("'ninja-1.13.0.tar.gz' is not a wheel file name"),
            std::string::npos);
  std::string bad_sha =
      pip +
      "[[tool]]\nproject = \"ninja\"\nfile = \"ninja-1-py3-none-any.whl\"\nsha256 = \"abc\"\n";
  EXPECT_NE(build_env_error(bad_sha).find("bad sha256 'abc'"), std::string::npos);
  // No tags: packaging refuses it (the old pattern took any "NAME-….whl").
  EXPECT_NE(build_env_error(pip + tool("ninja", "ninja-1.whl"))
                .find("'ninja-1.whl' is not a wheel file name"),
            std::string::npos);
  EXPECT_NE(build_env_error(pip + "[[tool]]\nprojet = \"x\"\n").find("unknown key 'tool.projet'"),
            std::string::npos);
  std::string twice = pins_text(pip) + "\n[[torch-runtime]]\ntorch = \"2.11.0\"\n";
  EXPECT_NE(build_env_error(twice).find("a second torch-runtime for torch 2.11.0"),
            std::string::npos);
}

TEST(BuildEnv, TheShippedPinsParse) {
  auto shipped = parse_build_env(kEmbeddedBuildEnv, "<built-in>").value();
  EXPECT_EQ(shipped.tools.front().project, "pip");
  EXPECT_NE(shipped.runtime_for("2.11.0"), nullptr);
  // The repository reads tools/setuptools-env.toml, not a package named "tools".
  TempDir dir = TempDir::create(fs::temp_directory_path(), "kiln-env-").value();
  fs::create_directories(dir.path() / "manifests" / "tools");
  std::ofstream(dir.path() / "manifests" / "tools" / "setuptools-env.toml")
      << tool("pip", "pip-24.0-py3-none-any.whl");
  Repository repo =
      Repository::load(dir.path() / "manifests", dir.path() / "patches", "manifests").value();
  EXPECT_TRUE(repo.manifests().empty());
  auto pins = repo.build_env().value();
  EXPECT_EQ(pins.display_path, "manifests/tools/setuptools-env.toml");
  EXPECT_EQ(pins.tools.at(0).file, "pip-24.0-py3-none-any.whl");
}

}  // namespace kiln::manifest
