#include "manifest/canonical_text.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "manifest/repository.h"
#include "packaging/name.h"
#include "unit/source_dir.h"

namespace kiln::manifest {

namespace {

using json = nlohmann::json;

const fs::path kShipped = fs::path(kiln::test::source_dir()) / "manifests";

Repository shipped() {
  return Repository::load(kShipped, fs::path(kiln::test::source_dir()) / "patches", "manifests")
      .value();
}

// What the canonical form leaves out, from the manifest itself.
SourcePlace place_of(const Manifest& m) {
  return {m.source.url, m.source.size, m.source.path};
}

// `m` written back from its canonical form into a fresh manifests directory (with its patches)
// and loaded from there as any manifest is.
Manifest reloaded(const Manifest& m, const TempDir& dir) {
  std::string text = manifest_text(m.canonical(), place_of(m)).value();
  std::string name = packaging::normalize_name(m.name);
  fs::path file = dir.path() / "manifests" / name / (m.version + ".toml");
  write_file_atomic(file, text).value();
  for (const auto& p : m.patches)
    write_file_atomic(dir.path() / "patches" / name / m.version / p.name, read_file(p.path).value())
        .value();
  auto loaded = load_manifest(file, "rebuilt.toml", dir.path() / "patches");
  EXPECT_TRUE(loaded) << m.name << " " << m.version << ": " << loaded.error().message << "\n"
                      << text;
  return loaded ? *loaded : m;
}

}  // namespace

// Every shipped manifest, written from its canonical form and loaded again, has the same
// canonical form: the key `kiln rebuild` computes from a wheel's inputs is the wheel's.
TEST(CanonicalText, EveryShippedManifestComesBackWithTheSameCanonicalForm) {
  Repository repo = shipped();
  ASSERT_GE(repo.manifests().size(), 7u);  // manifests/ holds 7 package versions
  std::set<Source::Kind> kinds;
  for (const Manifest& m : repo.manifests()) {
    auto dir = TempDir::create(fs::temp_directory_path(), "kiln-canonical-").value();
    Manifest back = reloaded(m, dir);
    EXPECT_EQ(back.canonical(), m.canonical()) << m.name << " " << m.version;
    kinds.insert(m.source.kind);
  }
  // The shipped set covers PyPI, git and local sources.
  EXPECT_TRUE(kinds.count(Source::Kind::Pypi) && kinds.count(Source::Kind::Git) &&
              kinds.count(Source::Kind::Local));
}

TEST(CanonicalText, EveryShippedTargetComesBackWithTheSameCanonicalForm) {
  Repository repo = shipped();
  std::set<ToolkitKind> toolkits;
  for (const std::string& name : repo.target_names()) {
    Target t = repo.target(name).value();
    std::string text = target_text(t.canonical(), t.torch_index_url).value();
    auto back = parse_target(text, "rebuild", "rebuilt.toml");
    ASSERT_TRUE(back) << name << ": " << back.error().message << "\n" << text;
    EXPECT_EQ(back->canonical(), t.canonical()) << name;
    EXPECT_EQ(back->torch_index_url, t.torch_index_url) << name;
    toolkits.insert(t.cuda_toolkit);
    // With other archs too (an --archs override is recorded as the archs it built).
    Target other = with_archs(t, ArchList::parse("8.0;9.0a;12.0+PTX").value());
    auto again = parse_target(target_text(other.canonical(), "").value(), "rebuild", "x.toml");
    ASSERT_TRUE(again) << again.error().message;
    EXPECT_EQ(again->canonical(), other.canonical());
  }
  EXPECT_EQ(toolkits.size(), 3u);  // system, wheels and debian
}

// A url source's URL and size, which the canonical form leaves out, come from beside it; a wheel
// without them cannot be rebuilt, and says which field.
TEST(CanonicalText, WhatTheCanonicalFormLeavesOutMustBeGiven) {
  json package = shipped().select("kiln-demo").value()->canonical();
  auto local = manifest_text(package, {});
  ASSERT_FALSE(local);
  EXPECT_EQ(local.error().kind, ErrorKind::BadInput);
  EXPECT_EQ(local.error().message,
            "kiln.json: inputs.package.source is a local source: give its tree (--source DIR)");
  package["source"] = {{"kind", 1}, {"sha256", std::string(64, 'a')}};
  EXPECT_EQ(manifest_text(package, {}).error().message,
            "kiln.json: inputs.package.source is a url source, and the wheel names no URL for it");
  std::string text =
      manifest_text(package, {"https://example.org/a b\"c.tar.gz", 1234, {}}).value();
  EXPECT_NE(text.find("url = \"https://example.org/a b\\\"c.tar.gz\""), std::string::npos) << text;
  EXPECT_NE(text.find("size = 1234"), std::string::npos) << text;
}

// A stranger's kiln.json: every malformed field is a bad-input error naming it, never a throw.
TEST(CanonicalText, AMalformedDocumentIsRefusedNamingTheField) {
  json good = shipped().select("causal-conv1d").value()->canonical();
  auto message = [](const json& j) {
    auto text = manifest_text(j, {});
    return text ? std::string("(written)") : text.error().message;
  };
  auto refused = [&](const std::string& pointer, const json& value) {
    json j = good;
    j[json::json_pointer(pointer)] = value;
    return message(j);
  };
  EXPECT_EQ(refused("/version", 1), "kiln.json: inputs.package.version is not a string");
  json without_summary = good;
  without_summary.erase("summary");
  EXPECT_EQ(message(without_summary), "kiln.json: inputs.package.summary is missing");
  EXPECT_EQ(message(good), "(written)");
  EXPECT_EQ(refused("/source/kind", 9),
            "kiln.json: inputs.package.source names an unknown source kind");
  EXPECT_EQ(refused("/source/kind", "0"),
            "kiln.json: inputs.package.source.kind is not an integer");
  EXPECT_EQ(refused("/source", "pypi"), "kiln.json: inputs.package.source is not an object");
  EXPECT_EQ(refused("/extensions/0/shards/0/units", 1ULL << 40),
            "kiln.json: inputs.package.extensions[0].shards[0].units is out of range");
  EXPECT_EQ(refused("/extensions/0/nvcc_flags", {1}),
            "kiln.json: inputs.package.extensions[0].nvcc_flags holds something that is not a "
            "string");
  EXPECT_EQ(refused("/patches", "0001.patch"), "kiln.json: inputs.package.patches is not an array");
  EXPECT_EQ(manifest_text(json::array(), {}).error().message,
            "kiln.json: inputs.package is not an object");
  EXPECT_EQ(target_text(json{{"archs", 90}}, "").error().message,
            "kiln.json: inputs.target.archs is not a string");
}

}  // namespace kiln::manifest
