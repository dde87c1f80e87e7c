#include "rebuild/recipe.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/repository.h"
#include "resolve/plan.h"
#include "unit/source_dir.h"

namespace kiln::rebuild {

namespace {

using json = nlohmann::json;

manifest::Repository shipped() {
  return manifest::Repository::load(fs::path(kiln::test::source_dir()) / "manifests",
                                    fs::path(kiln::test::source_dir()) / "patches", "manifests")
      .value();
}

// The kiln.json the pipeline writes for `item` (the parts write_recipe reads).
wheel::Provenance provenance_of(const resolve::PlanItem& item, const resolve::ResolvedTarget& rt) {
  const manifest::Manifest& m = *item.manifest;
  wheel::Provenance p;
  p.format = wheel::kProvenanceFormat;
  p.build_key = item.key;
  p.inputs = item.inputs;
  wheel::RebuildRecipe r;
  r.kiln_commit = "0123456789ab";
  if (m.source.kind == manifest::Source::Kind::Git) r.source_url = m.source.url;
  if (m.backend->compiles) r.torch_index_url = rt.target.torch_index_url;
  for (const auto& patch : m.patches)
    r.patches.push_back({patch.name, patch.sha256, read_file(patch.path).value()});
  p.rebuild = r;
  return p;
}

// The key of the build `recipe` describes, planned from its own directory for 16 slots (not the
// 2 the wheel was planned for: the recorded shard counts are used).
std::string replanned_key(const Recipe& recipe, const manifest::Target& fallback) {
  auto repo = manifest::Repository::load(recipe.manifests, recipe.patches, "rebuild").value();
  manifest::Target target = recipe.target.empty() ? fallback : repo.target(recipe.target).value();
  resolve::Plan plan = resolve::make_plan(repo, {recipe.requirement}, {target}, 16).value();
  EXPECT_EQ(plan.items.size(), 1u);
  resolve::PlanItem item = plan.items.at(0);
  resolve::use_shards(item, recipe.shards).value();
  return item.key;
}

}  // namespace

// A patched PyPI package, a git one, a pure one and a local fixture: written from what their
// wheels' kiln.json would hold, into a fresh directory, and planned again, each has its wheel's
// key.
TEST(RebuildRecipe, EachWheelsKeyComesBackFromItsKilnJsonAlone) {
  auto repo = shipped();
  manifest::Target target = repo.target("default").value();
  resolve::Plan plan =
      resolve::make_plan(
          repo, {"causal-conv1d==1.7.0", "fast-hadamard-transform", "fla-core", "kiln-demo"},
          {target}, 2)
          .value();
  ASSERT_EQ(plan.items.size(), 4u);
  for (const auto& item : plan.items) {
    wheel::Provenance p = provenance_of(item, plan.targets.at(0));
    auto work = TempDir::create(fs::temp_directory_path(), "kiln-recipe-").value();
    bool local = item.manifest->source.kind == manifest::Source::Kind::Local;
    Recipe recipe =
        write_recipe(p, work.path(), local ? item.manifest->source.path : fs::path()).value();
    EXPECT_EQ(replanned_key(recipe, target), item.key) << item.manifest->name;
    EXPECT_EQ(recipe.shards, item.shards);
    // What nobody else can fetch is named: the system toolkit of compiled ones, a local tree.
    bool compiles = item.manifest->backend->compiles;
    EXPECT_EQ(recipe.unverifiable.size(), std::size_t(compiles) + std::size_t(local))
        << item.manifest->name;
  }
}

TEST(RebuildRecipe, ARecipeThatDoesNotMatchItsInputsIsRefused) {
  auto repo = shipped();
  manifest::Target target = repo.target("default").value();
  resolve::Plan plan = resolve::make_plan(repo, {"causal-conv1d==1.7.0"}, {target}, 2).value();
  wheel::Provenance good = provenance_of(plan.items.at(0), plan.targets.at(0));
  auto refused = [&](const wheel::Provenance& p) {
    auto work = TempDir::create(fs::temp_directory_path(), "kiln-recipe-").value();
    auto r = write_recipe(p, work.path(), {});
    if (r) return std::string("(written)");
    EXPECT_EQ(r.error().kind, ErrorKind::BadInput);
    return r.error().message;
  };
  wheel::Provenance p = good;
  p.rebuild->patches[1].bytes += "\n";
  EXPECT_EQ(refused(p),
            "kiln.json: rebuild.patches[1] (0002-arch-list-from-torch-cuda-arch-list.patch) is not "
            "the bytes its sha256 names");
  p = good;
  p.rebuild->patches.pop_back();
  EXPECT_EQ(refused(p),
            "kiln.json: inputs.package.patches names 5 patches, rebuild.patches holds 4");
  p = good;
  std::swap(p.rebuild->patches[0], p.rebuild->patches[1]);
  EXPECT_EQ(refused(p),
            "kiln.json: rebuild.patches[0] is not the patch inputs.package.patches[0] names");
  // A name that would leave the patches directory.
  p = good;
  p.rebuild->patches[0].name = "../../escape.patch";
  p.inputs["package"]["patches"][0]["name"] = "../../escape.patch";
  EXPECT_EQ(refused(p), "kiln.json: rebuild.patches[0] has a bad name");
  p = good;
  p.inputs["package"]["name"] = "../x";
  EXPECT_EQ(refused(p), "kiln.json: inputs.package names no valid project name and version");
  p = good;
  p.rebuild.reset();
  p.format = 1;
  EXPECT_EQ(refused(p),
            "kiln.json: it has no rebuild recipe (format 1): only wheels built by kiln with "
            "provenance format 2 can be rebuilt from the wheel alone");
  p = good;
  p.inputs["shards"] = {{"causal_conv1d_cuda/csrc/causal_conv1d_bwd.cu", 0}};
  EXPECT_EQ(refused(p),
            "kiln.json: inputs.shards[\"causal_conv1d_cuda/csrc/causal_conv1d_bwd.cu\"] is not a "
            "shard count");
  // Where a stranger's kiln.json could point kiln: a local file as the source, a program another
  // user planted as the interpreter or compiler, the builder's own tree.
  p = good;
  p.rebuild->torch_index_url = "file:///etc/";
  EXPECT_EQ(refused(p),
            "kiln.json: rebuild names file:///etc/: a rebuild fetches from http(s) URLs only");
  auto planted = TempDir::create(fs::temp_directory_path(), "kiln-planted-").value();
  if (::geteuid() == 0) {  // a directory of nobody's
    fs::create_directory(planted.path() / "bin");
    ASSERT_EQ(::chown((planted.path() / "bin").c_str(), 65534, 65534), 0);
    write_file_atomic(planted.path() / "bin" / "python3", "#!/bin/sh\n", 0755).value();
    p = good;
    p.inputs["target"]["python"]["interpreter"] = (planted.path() / "bin" / "python3").string();
    EXPECT_EQ(refused(p), cat("kiln.json: inputs.target.python.interpreter is not one this "
                              "rebuild may run: ",
                              (planted.path() / "bin" / "python3").string(), ": ",
                              (planted.path() / "bin").string(),
                              " is owned by uid 65534, neither root nor this user"));
  }
  p = good;
  p.inputs["target"]["cxx"] = "./g++";
  EXPECT_EQ(refused(p),
            "kiln.json: inputs.target.cxx is not one this rebuild may run: ./g++ is not an "
            "absolute path");
  p = good;
  p.inputs["package"]["source"] = {{"kind", 3}, {"path", "/srv/tree"}, {"sha256", ""}};
  EXPECT_EQ(refused(p),
            "causal-conv1d 1.7.0 was built from a local tree of its builder's, which only its "
            "tree sha256 names: rebuild it with --force --source DIR");
  EXPECT_EQ(refused(good), "(written)");
}

TEST(RebuildRecipe, RecordedShardsMustFitTheManifest) {
  auto repo = shipped();
  resolve::Plan plan =
      resolve::make_plan(repo, {"causal-conv1d==1.7.0"}, {repo.target("default").value()}, 2)
          .value();
  resolve::PlanItem item = plan.items.at(0);
  const std::string source = "causal_conv1d_cuda/csrc/causal_conv1d_bwd.cu";
  EXPECT_FALSE(resolve::use_shards(item, {{source, 19}}));  // 18 units
  EXPECT_FALSE(resolve::use_shards(item, {{"other/x.cu", 2}}));
  EXPECT_FALSE(resolve::use_shards(item, {}));
  std::string before = item.key;
  resolve::use_shards(item, {{source, 9}}).value();
  EXPECT_NE(item.key, before);
  EXPECT_EQ(item.inputs["shards"][source], 9);
  EXPECT_EQ(item.key, sha256_hex(item.inputs.dump()));
}

// mamba-ssm's backward files hold 5 launch configurations each, at most 2 shards (max-shards):
// 16 slots plan 2, and a recorded 3 is refused.
TEST(RebuildRecipe, RecordedShardsMustFitTheManifestsLimit) {
  auto repo = shipped();
  resolve::Plan plan =
      resolve::make_plan(repo, {"mamba-ssm"}, {repo.target("default").value()}, 16).value();
  resolve::PlanItem item = plan.items.at(0);
  ASSERT_EQ(item.shards.size(), 6u);
  for (const auto& [source, n] : item.shards) EXPECT_EQ(n, 2) << source;
  std::map<std::string, int> recorded = item.shards;
  const std::string source =
      "selective_scan_cuda/csrc/selective_scan/selective_scan_bwd_fp32_real.cu";
  recorded.at(source) = 3;
  EXPECT_FALSE(resolve::use_shards(item, recorded));
  recorded.at(source) = 1;
  resolve::use_shards(item, recorded).value();
  EXPECT_EQ(item.inputs["shards"][source], 1);
}

}  // namespace kiln::rebuild
