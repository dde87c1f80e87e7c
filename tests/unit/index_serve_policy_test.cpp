#include "index/serve_policy.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/fs.h"

namespace kiln::index {

namespace {

namespace fs = std::filesystem;

using Names = std::set<std::string, std::less<>>;

const char* kTarget = R"([target]
description = "test"
archs = "9.0;12.0"

[python]
interpreter = "python3"

[torch]
version = "2.11.0"
INDEX
[[torch.wheel]]
python = "cp311"
file = "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
sha256 = "7aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a"

[[torch.wheel]]
python = "cp312"
file = "torch-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl"
sha256 = "8aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a"

[cuda]
toolkit = "system"
version = "13.0"
)";

// A manifests directory: Foo_Bar 1.0, a broken manifest of "broken-pkg", and targets.
class ServePolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-serve-policy-").value());
    fs::create_directories(manifests() / "foo-bar");
    std::ofstream(manifests() / "foo-bar" / "1.0.toml")
        << "[package]\nname = \"Foo_Bar\"\nversion = \"1.0\"\nsummary = \"s\"\n"
           "license = \"MIT\"\nrequires-python = \">=3.9\"\n\n[source]\npypi = \"Foo_Bar\"\n"
           "sha256 = \""
        << std::string(64, 'a') << "\"\n\n[build]\nbackend = \"pure\"\npackages = [\"pkg\"]\n";
    fs::create_directories(manifests() / "broken-pkg");
    std::ofstream(manifests() / "broken-pkg" / "2.0.toml")
        << "[package]\nname = \"broken-pkg\"\nversion = 2\n";
    fs::create_directories(manifests() / "targets");
  }
  void add_target(const std::string& name, const std::string& index_line) {
    std::string text = kTarget;
    text.replace(text.find("INDEX\n"), 6, index_line);
    std::ofstream(manifests() / "targets" / (name + ".toml")) << text;
  }
  fs::path manifests() const { return dir_->path() / "manifests"; }
  void load() {
    repo_ = manifest::Repository::load(manifests(), dir_->path() / "patches", "manifests").value();
    sources_.repository = &*repo_;
  }
  std::unique_ptr<TempDir> dir_;
  std::optional<manifest::Repository> repo_;
  ServeSources sources_{
      .fallback = "",
      .resolver_index = [] { return Expected<ResolverIndex>(Error::failed("unasked")); },
      .torch_requirements = [](const manifest::TorchWheel&) { return Names{}; }};
};

}  // namespace

TEST_F(ServePolicyTest, OwnNamesAreEveryManifestsAndKilns) {
  load();
  EXPECT_EQ(own_names(sources_.repository), (Names{"broken-pkg", "foo-bar", "kiln-wheels"}));
  EXPECT_EQ(serve_routes(sources_).value().own, (Names{"broken-pkg", "foo-bar", "kiln-wheels"}));
}

TEST_F(ServePolicyTest, WithoutManifestsOnlyKilnsOwnWheelAndNoTargets) {
  add_target("t", "");
  sources_.repository = Error::bad_input("no manifests directory at m");
  EXPECT_EQ(own_names(sources_.repository), Names{"kiln-wheels"});
  Routes routes = serve_routes(sources_).value();
  EXPECT_EQ(routes.own, Names{"kiln-wheels"});
  EXPECT_TRUE(routes.targets.empty());
  EXPECT_TRUE(routes.declared.empty());
}

TEST_F(ServePolicyTest, Fallback) {
  load();
  EXPECT_EQ(serve_routes(sources_).value().fallback, "");  // --no-fallback: the default not asked
  sources_.fallback = "https://mirror.example/simple";
  EXPECT_EQ(serve_routes(sources_).value().fallback, "https://mirror.example/simple/");
  sources_.fallback = "https://user@mirror.example/simple/";
  EXPECT_FALSE(serve_routes(sources_));
  // The default: the index kiln resolves with.
  sources_.fallback = std::nullopt;
  sources_.resolver_index = [] {
    return Expected<ResolverIndex>(ResolverIndex{"https://pypi.org/simple/", "default"});
  };
  EXPECT_EQ(serve_routes(sources_).value().fallback, "https://pypi.org/simple/");
  sources_.resolver_index = [] {
    return Expected<ResolverIndex>(
        ResolverIndex{"https://user:secret@pypi.example/simple/", "$PIP_INDEX_URL"});
  };
  auto refused = serve_routes(sources_);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().kind, ErrorKind::BadInput);
  EXPECT_TRUE(refused.error().message.ends_with(
      " (from $PIP_INDEX_URL): give --fallback-url, or --no-fallback"))
      << refused.error().message;
  sources_.resolver_index = [] {
    return Expected<ResolverIndex>(Error::bad_input("pip.conf:3: malformed"));
  };
  EXPECT_EQ(serve_routes(sources_).error().message, "pip.conf:3: malformed");
}

TEST_F(ServePolicyTest, EachTargetRoutesTorchAndItsRequirementsToItsIndex) {
  add_target("plain", "");
  add_target("indexed", "index-url = \"https://download.pytorch.org/whl/cu130\"\n");
  add_target("refused", "index-url = \"https://user@torch.example/whl/\"\n");
  std::ofstream(manifests() / "targets" / "bad.toml") << "[target]\n";
  load();
  sources_.torch_requirements = [](const manifest::TorchWheel& w) {
    return w.python_tag == "cp311" ? Names{"filelock", "nvidia-cublas"} : Names{"sympy"};
  };
  Routes routes = serve_routes(sources_).value();
  EXPECT_EQ(routes.targets.count("bad"), 0u);
  EXPECT_EQ(routes.declared.count("bad"), 0u);

  EXPECT_TRUE(routes.targets.at("plain").names.empty());  // the fallback's
  const TargetFacts& facts = routes.declared.at("plain");
  EXPECT_EQ(facts.torch, "2.11.0");
  EXPECT_EQ(facts.cuda, "13.0");
  EXPECT_EQ(facts.python, (std::vector<std::string>{"cp311", "cp312"}));
  EXPECT_EQ(facts.archs, (std::vector<std::string>{"sm_90", "sm_120"}));

  const TargetUpstream& up = routes.targets.at("indexed");
  EXPECT_EQ(up.url, "https://download.pytorch.org/whl/cu130/");
  EXPECT_EQ(up.names, (Names{"filelock", "nvidia-cublas", "sympy", "torch"}));
  EXPECT_EQ(routes.upstream_page("indexed", "sympy"),
            "https://download.pytorch.org/whl/cu130/sympy/");

  // A refused index is never replaced by the fallback: torch is found nowhere.
  EXPECT_EQ(routes.targets.at("refused").url, "");
  EXPECT_EQ(routes.targets.at("refused").names,
            (Names{"filelock", "nvidia-cublas", "sympy", "torch"}));
}

}  // namespace kiln::index
