// Which index kiln reads: pip's sources of configuration, in pip's order.
#include "fetch/index_config.h"

#include <gtest/gtest.h>

#include "../support/fetch_util.h"

namespace kiln::fetch {

using kiln::testing::ScopedEnv;
using kiln::testing::write_text;

class IndexConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_.emplace(TempDir::create(fs::temp_directory_path(), "kiln-fetch-").value());
    home_ = dir_->path() / "home";
    fs::create_directories(home_);
    env_.emplace_back(std::make_unique<ScopedEnv>("HOME", home_.c_str()));
    env_.emplace_back(
        std::make_unique<ScopedEnv>("XDG_CONFIG_DIRS", (dir_->path() / "xdg").c_str()));
    env_.emplace_back(std::make_unique<ScopedEnv>("XDG_CONFIG_HOME", nullptr));
    env_.emplace_back(std::make_unique<ScopedEnv>("VIRTUAL_ENV", nullptr));
    env_.emplace_back(std::make_unique<ScopedEnv>("PIP_CONFIG_FILE", nullptr));
    env_.emplace_back(std::make_unique<ScopedEnv>("PIP_INDEX_URL", nullptr));
  }
  void set(const char* name, const std::string& value) {
    env_.emplace_back(std::make_unique<ScopedEnv>(name, value.c_str()));
  }
  // This machine's /etc/pip.conf takes part too; tests that need it silent skip when it is not.
  static bool system_config_sets_index() {
    auto text = read_file("/etc/pip.conf");
    return text && text->find("index") != std::string::npos;
  }

  std::optional<TempDir> dir_;
  fs::path home_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

TEST_F(IndexConfigTest, FilesInPipsOrder) {
  set("XDG_CONFIG_DIRS", "/x1:/x2");
  set("VIRTUAL_ENV", "/venv");
  std::vector<fs::path> want = {"/x1/pip/pip.conf",
                                "/x2/pip/pip.conf",
                                "/etc/pip.conf",
                                home_ / ".pip/pip.conf",
                                home_ / ".config/pip/pip.conf",
                                "/venv/pip.conf"};
  EXPECT_EQ(pip_config_files(), want);

  set("XDG_CONFIG_HOME", (dir_->path() / "cfg").string());
  want[4] = dir_->path() / "cfg/pip/pip.conf";
  EXPECT_EQ(pip_config_files(), want);

  // $PIP_CONFIG_FILE comes last; when it exists, the per-user files are not read.
  set("PIP_CONFIG_FILE", (dir_->path() / "missing.conf").string());
  want.push_back(dir_->path() / "missing.conf");
  EXPECT_EQ(pip_config_files(), want);
  write_text(dir_->path() / "env.conf", "");
  set("PIP_CONFIG_FILE", (dir_->path() / "env.conf").string());
  EXPECT_EQ(pip_config_files(),
            (std::vector<fs::path>{"/x1/pip/pip.conf", "/x2/pip/pip.conf", "/etc/pip.conf",
                                   "/venv/pip.conf", dir_->path() / "env.conf"}));
  set("PIP_CONFIG_FILE", "/dev/null");
  EXPECT_TRUE(pip_config_files().empty());
}

TEST_F(IndexConfigTest, DefaultIsPypi) {
  set("PIP_CONFIG_FILE", "/dev/null");  // no configuration files at all, as with pip
  auto index = configured_index().value();
  EXPECT_EQ(index.url, "https://pypi.org/simple/");
  EXPECT_EQ(index.origin, "default");
}

TEST_F(IndexConfigTest, LaterFilesOverrideEarlierOnes) {
  if (system_config_sets_index()) GTEST_SKIP() << "/etc/pip.conf sets an index";
  write_text(dir_->path() / "xdg/pip/pip.conf",
             "[global]\nindex-url = https://site.example/simple\n");
  EXPECT_EQ(configured_index().value().url, "https://site.example/simple/");
  write_text(home_ / ".pip/pip.conf", "[global]\nindex-url = https://legacy.example/simple/\n");
  EXPECT_EQ(configured_index().value().url, "https://legacy.example/simple/");
  write_text(home_ / ".config/pip/pip.conf",
             "# mine\n[global]\nINDEX_URL: https://user.example/simple/\n");
  auto index = configured_index().value();
  EXPECT_EQ(index.url, "https://user.example/simple/");
  EXPECT_EQ(index.origin, (home_ / ".config/pip/pip.conf").string() + ":3 [global]");
  fs::path venv = dir_->path() / "venv";
  write_text(venv / "pip.conf", "[global]\nindex-url = https://venv.example/simple/\n");
  set("VIRTUAL_ENV", venv.string());
  EXPECT_EQ(configured_index().value().url, "https://venv.example/simple/");
  write_text(dir_->path() / "env.conf", "[global]\nindex-url = https://env-file.example/simple/\n");
  set("PIP_CONFIG_FILE", (dir_->path() / "env.conf").string());
  EXPECT_EQ(configured_index().value().url, "https://env-file.example/simple/");
  set("PIP_INDEX_URL", "https://env.example/simple");
  index = configured_index().value();
  EXPECT_EQ(index.url, "https://env.example/simple/");
  EXPECT_EQ(index.origin, "$PIP_INDEX_URL");
  index = configured_index("https://explicit.example/simple/").value();
  EXPECT_EQ(index.url, "https://explicit.example/simple/");
  EXPECT_EQ(index.origin, "--index-url");
}

TEST_F(IndexConfigTest, ExistingPipConfigFileHidesUserFiles) {
  if (system_config_sets_index()) GTEST_SKIP() << "/etc/pip.conf sets an index";
  write_text(home_ / ".config/pip/pip.conf",
             "[global]\nindex-url = https://user.example/simple/\n");
  write_text(dir_->path() / "env.conf", "[global]\ntimeout = 10\n");
  set("PIP_CONFIG_FILE", (dir_->path() / "env.conf").string());
  EXPECT_EQ(configured_index().value().url, "https://pypi.org/simple/");
}

TEST_F(IndexConfigTest, InstallSectionBeatsGlobal) {
  if (system_config_sets_index()) GTEST_SKIP() << "/etc/pip.conf sets an index";
  write_text(dir_->path() / "xdg/pip/pip.conf",
             "[install]\nindex-url = https://install.example/simple/\n");
  write_text(home_ / ".config/pip/pip.conf",
             "[global]\nindex-url = https://global.example/simple/\n[freeze]\nindex-url = "
             "https://no.example/\n");
  auto index = configured_index().value();
  EXPECT_EQ(index.url, "https://install.example/simple/");
  EXPECT_EQ(index.origin, (dir_->path() / "xdg/pip/pip.conf").string() + ":2 [install]");
}

TEST_F(IndexConfigTest, BadFilesAndUrlsAreErrors) {
  write_text(home_ / ".config/pip/pip.conf", "[global]\nindex-url\n");
  auto bad = configured_index();
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::BadInput);
  EXPECT_EQ(bad.error().message, (home_ / ".config/pip/pip.conf").string() +
                                     ":2: expected '[section]' or 'key = value'");

  set("PIP_INDEX_URL", "/srv/simple");
  auto not_http = configured_index();
  ASSERT_FALSE(not_http);
  EXPECT_EQ(not_http.error().message,
            "index URL '/srv/simple' (from $PIP_INDEX_URL) must start with http:// or https://");
  auto secret = configured_index("ftp://u:pw@host/simple");
  ASSERT_FALSE(secret);
  EXPECT_EQ(
      secret.error().message,
      "index URL 'ftp://u:***@host/simple' (from --index-url) must start with http:// or https://");
}

}  // namespace kiln::fetch
