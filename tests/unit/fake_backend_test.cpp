// A backend kiln does not ship, added as a new one is: its row (what it is) and its build, in this
// one file. resolve plans it by its traits, compile finds its build by its name, and a manifest
// switched to it (`--backend`) gets a key of its own.
#include <gtest/gtest.h>

#include <fstream>

#include "compile/backend.h"
#include "core/fs.h"
#include "manifest/repository.h"
#include "resolve/plan.h"

namespace kiln {

namespace {

namespace fs = std::filesystem;

// The row: ships its packages as a generated module, compiles nothing.
constexpr manifest::BackendSpec kFake{"fake", false, false, false, true};

class FakeBackend : public compile::Backend {
 public:
  Expected<compile::PlannedBuild> plan(const compile::BuildRequest& request) const override {
    compile::PlannedBuild planned;
    planned.finish = [packages = request.manifest->packages]() -> Expected<compile::BuildOutput> {
      compile::BuildOutput out;
      for (const auto& package : packages)
        out.files.push_back({package + "/__init__.py", "BUILT_BY = 'fake'\n"});
      return out;
    };
    return planned;
  }
};

const compile::Implementation kFakeBuild[] = {
    {"fake", [] { return std::unique_ptr<compile::Backend>(std::make_unique<FakeBackend>()); }}};

class FakeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::make_unique<TempDir>(TempDir::create(fs::temp_directory_path(), "kiln-fake-").value());
    fs::create_directories(dir_->path() / "manifests" / "demo");
    std::ofstream(dir_->path() / "manifests" / "demo" / "1.0.0.toml")
        << "[package]\nname = \"demo\"\nversion = \"1.0.0\"\nsummary = \"s\"\n"
           "license = \"MIT\"\nrequires-python = \">=3.9\"\n\n[source]\npypi = \"demo\"\n"
           "sha256 = \""
        << std::string(64, 'a') << "\"\n\n[build]\nbackend = \"pure\"\npackages = [\"demo\"]\n";
  }
  resolve::Plan plan(const manifest::BackendSpec* backend) {
    auto repo = manifest::Repository::load(dir_->path() / "manifests", dir_->path() / "patches",
                                           "manifests");
    EXPECT_TRUE(repo) << repo.error().message;
    repo_ = std::make_unique<manifest::Repository>(std::move(*repo));
    manifest::Target target;
    target.name = "default";
    auto made = resolve::make_plan(*repo_, {"demo"}, {target}, 1, backend);
    EXPECT_TRUE(made) << made.error().message;
    return std::move(*made);
  }
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<manifest::Repository> repo_;
};

}  // namespace

TEST_F(FakeBackendTest, PlannedByItsTraitsAndBuiltByItsName) {
  resolve::Plan pure = plan(nullptr);
  std::string pure_key = pure.items.at(0).key;
  resolve::Plan fake = plan(&kFake);
  ASSERT_EQ(fake.items.size(), 1u);
  const resolve::PlanItem& item = fake.items[0];
  EXPECT_EQ(item.manifest->backend, &kFake);
  EXPECT_EQ(item.inputs["package"]["backend"], "fake");
  EXPECT_NE(item.key, pure_key);                    // the backend is part of the key
  EXPECT_FALSE(item.inputs.contains("toolchain"));  // compiles nothing: no toolchain in the key
  EXPECT_TRUE(item.object_salt.empty());

  // kiln's own builds do not have it; the test's table does.
  auto shipped = compile::make_backend(kFake);
  ASSERT_FALSE(shipped);
  EXPECT_NE(shipped.error().message.find("the fake backend has no build"), std::string::npos);
  auto backend = compile::make_backend(kFake, kFakeBuild);
  ASSERT_TRUE(backend) << backend.error().message;
  compile::BuildRequest request;
  request.manifest = item.manifest;
  auto built = compile::build_alone(**backend, request);
  ASSERT_TRUE(built) << built.error().message;
  ASSERT_EQ(built->files.size(), 1u);
  EXPECT_EQ(built->files[0].path, "demo/__init__.py");
}

// A backend that needs what its row says is refused on a manifest without it, naming the backend.
TEST_F(FakeBackendTest, ItsRowsRulesApplyToAManifestSwitchedToIt) {
  constexpr manifest::BackendSpec kExtensions{"fake-ext", false, false, true, false};
  auto repo =
      manifest::Repository::load(dir_->path() / "manifests", dir_->path() / "patches", "manifests")
          .value();
  manifest::Target target;
  target.name = "default";
  auto made = resolve::make_plan(repo, {"demo"}, {target}, 1, &kExtensions);
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("--backend fake-ext: demo 1.0.0 declares no "
                                      "[[build.extension]]"),
            std::string::npos)
      << made.error().message;
}

TEST(Backends, EveryRowHasItsBuild) {
  for (const auto& spec : manifest::backends()) {
    auto backend = compile::make_backend(spec);
    EXPECT_TRUE(backend) << spec.name;
  }
  EXPECT_EQ(manifest::backends().size(), compile::implementations().size());
}

// A package argument's marker is evaluated per target (issue 51): where it is false the package
// is left out for that target, as pip ignores it; a marker naming what kiln does not know of a
// target is an error naming it.
TEST_F(FakeBackendTest, MarkersChooseTheTargetsAPackageIsBuiltFor) {
  auto repo =
      manifest::Repository::load(dir_->path() / "manifests", dir_->path() / "patches", "manifests")
          .value();
  manifest::Target py312, py311;
  py312.name = "py312";
  py312.python_version = "3.12";
  py311.name = "py311";
  py311.python_version = "3.11";
  auto plan =
      resolve::make_plan(repo, {"demo; python_version >= '3.12'"}, {py312, py311}, 1).value();
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].target_name, "py312");
  ASSERT_EQ(plan.ignored.size(), 1u);
  EXPECT_EQ(plan.ignored[0],
            "ignoring 'demo; python_version >= '3.12'' for target py311 (Python 3.11): its marker "
            "is false there");
  EXPECT_TRUE(
      resolve::make_plan(repo, {"demo; os_name == 'nt'"}, {py312}, 1).value().items.empty());
  // Named twice: the argument without a marker applies everywhere.
  EXPECT_EQ(resolve::make_plan(repo, {"demo; os_name == 'nt'", "demo[x]"}, {py312}, 1)
                .value()
                .items.size(),
            1u);
  auto unknown = resolve::make_plan(repo, {"demo; platform_release >= '6'"}, {py312}, 1);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("'demo; platform_release >= '6'' for target py312: the "
                                         "marker 'platform_release >= '6'' does not evaluate: it "
                                         "names platform_release, whose value is not known here"),
            std::string::npos)
      << unknown.error().message;
}

}  // namespace kiln
