#include "attest/wheel.h"

#include <gtest/gtest.h>

#include "attest/dsse.h"
#include "attest/statement.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "wheel/provenance.h"
#include "wheel/writer.h"

namespace kiln::attest {

namespace {

using json = nlohmann::json;

const std::string kSha(64, 'a'), kPatchSha(64, 'b'), kTorchSha(64, 'c'), kCudaSha(64, 'd'),
    kOtherTorchSha(64, 'e');

wheel::Provenance provenance() {
  wheel::Provenance p;
  p.kiln = "0.1.0";
  p.format = wheel::kProvenanceFormat;
  p.recipe = 6;
  p.build_key = std::string(64, '1');
  p.backend = "native";
  p.archs = "sm_90";
  p.inputs = {
      {"package",
       {{"name", "demo"},
        {"version", "1.0"},
        {"source", {{"kind", 0}, {"pypi", "demo"}, {"file", "demo-1.0.tar.gz"}, {"sha256", kSha}}},
        {"patches", {{{"name", "0001-fix.patch"}, {"sha256", kPatchSha}}}}}},
      {"target",
       {{"archs", "sm_90"},
        {"torch", {{"wheels", {{{"file", "torch-cp312.whl"}, {"sha256", kOtherTorchSha}}}}}}}},
      {"toolchain",
       {{"torch", {{"file", "torch-cp311.whl"}, {"sha256", kTorchSha}}},
        {"cuda",
         {{"toolkit", "wheels"}, {"wheels", {{{"file", "nvcc.whl"}, {"sha256", kCudaSha}}}}}}}},
      {"recipe", 6}};
  p.rebuild = wheel::RebuildRecipe{};
  p.rebuild->kiln_commit = "abc123";
  p.caveats = {"not sandboxed: KILN_SANDBOX=off"};
  return p;
}

class AttestWheelTest : public ::testing::Test {
 protected:
  // A wheel with this kiln.json, written by kiln's writer.
  fs::path wheel(const wheel::Provenance& p, const std::string& sub,
                 const std::string& body = "1") {
    wheel::WheelSpec spec;
    spec.distribution = "demo";
    spec.version = "1.0";
    spec.tag = "py3-none-any";
    spec.root_is_purelib = true;
    spec.metadata.name = "demo";
    spec.metadata.version = "1.0";
    spec.files = {{"demo/__init__.py", cat("x = ", body, "\n"), false}};
    spec.provenance_json = wheel::provenance_text(p);
    fs::create_directories(dir_.path() / sub);
    return wheel::write_wheel(spec, dir_.path() / sub).value();
  }
  std::string attest(const fs::path& w) {
    return attest_wheel(w, w.filename().string(), sha256_file(w).value(), *key_).value();
  }
  // The verdicts of verify_wheel, in order ("pass", "fail", "skip").
  std::string verdicts(const Verification& v) {
    std::vector<std::string> out;
    for (const auto& c : v.checks)
      out.push_back(c.verdict == Check::Verdict::Pass   ? "pass"
                    : c.verdict == Check::Verdict::Fail ? "fail"
                                                        : "skip");
    return join(out, " ");
  }
  // `statement` signed with the test's key, as one attestation line.
  std::string signed_line(const json& statement) {
    return envelope_line(
        sign_envelope(statement_text(statement), kInTotoPayloadType, *key_).value());
  }
  TempDir dir_ = TempDir::create(fs::temp_directory_path(), "kiln-attest-").value();
  std::unique_ptr<SigningKey> key_ = std::make_unique<SigningKey>(SigningKey::generate().value());
};

}  // namespace

TEST_F(AttestWheelTest, ThePredicateSaysWhatKilnJsonSays) {
  json pred = slsa_predicate(provenance(), "k1");
  const json& def = pred["buildDefinition"];
  EXPECT_EQ(def["buildType"], kBuildType);
  EXPECT_EQ(def["externalParameters"]["package"]["name"], "demo");
  EXPECT_EQ(def["externalParameters"]["target"]["archs"], "sm_90");
  const json& internal = def["internalParameters"];
  EXPECT_EQ(internal["build_key"], std::string(64, '1'));
  EXPECT_EQ(internal["sandboxed"], false);
  EXPECT_EQ(internal["inputs"]["toolchain"]["torch"]["sha256"], kTorchSha);
  EXPECT_FALSE(internal["inputs"].contains("package"));
  json deps = def["resolvedDependencies"];
  ASSERT_EQ(deps.size(), 4u) << deps.dump();
  EXPECT_EQ(deps[0], json({{"name", "demo-1.0.tar.gz"},
                           {"uri", "pkg:pypi/demo@1.0"},
                           {"digest", {{"sha256", kSha}}}}));
  EXPECT_EQ(deps[1]["name"], "0001-fix.patch");
  std::set<std::string> names;
  for (const auto& d : deps) names.insert(d["name"].get<std::string>());
  EXPECT_TRUE(names.count("torch-cp311.whl") && names.count("nvcc.whl"));
  EXPECT_FALSE(names.count("torch-cp312.whl"));  // a torch of the target this build did not use
  EXPECT_EQ(pred["runDetails"]["builder"]["id"], "urn:kiln:key:k1");
  EXPECT_EQ(pred["runDetails"]["builder"]["version"]["kiln_commit"], "abc123");

  wheel::Provenance git = provenance();
  git.inputs["package"]["source"] = {{"kind", 2}, {"commit", std::string(40, 'f')}};
  git.rebuild->source_url = "https://example.org/demo.git";
  EXPECT_EQ(slsa_predicate(git, "k1")["buildDefinition"]["resolvedDependencies"][0],
            json({{"uri", "git+https://example.org/demo.git"},
                  {"digest", {{"gitCommit", std::string(40, 'f')}}}}));
}

TEST_F(AttestWheelTest, AWheelItsAttestationAndTheKeyPassEveryCheck) {
  fs::path w = wheel(provenance(), "a");
  std::string line = attest(w);
  Verification v = verify_wheel(w, w.filename().string(), line, key_->public_key());
  EXPECT_EQ(verdicts(v), "pass pass pass pass pass");
  EXPECT_EQ(v.sha256, sha256_file(w).value());
  EXPECT_TRUE(v.ok());
  ReadStatement st = read_statement(parse_envelopes(line).value()[0].payload).value();
  ASSERT_EQ(st.subjects.size(), 1u);
  EXPECT_EQ(st.subjects[0].name, w.filename().string());
}

TEST_F(AttestWheelTest, EachTamperingFailsItsCheck) {
  fs::path w = wheel(provenance(), "a");
  std::string line = attest(w);
  const std::string name = w.filename().string();
  auto verify = [&](const fs::path& wheel, const std::string& as, const std::string& text,
                    const PublicKey& key) { return verify_wheel(wheel, as, text, key); };

  SigningKey other = SigningKey::generate().value();
  Verification wrong_key = verify(w, name, line, other.public_key());
  EXPECT_EQ(verdicts(wrong_key), "pass fail skip skip skip");
  EXPECT_NE(wrong_key.checks[1].message.find(key_->public_key().id().substr(0, 16)),
            std::string::npos);  // it names the key that did sign

  EXPECT_EQ(verdicts(verify(w, name, "{not json", key_->public_key())), "fail skip skip skip skip");

  // Another wheel's bytes under this name, and this wheel under another name.
  fs::path w2 = wheel(provenance(), "b", "2");
  EXPECT_EQ(verdicts(verify(w2, name, line, key_->public_key())), "pass pass pass fail skip");
  EXPECT_EQ(verdicts(verify(w, "demo-2.0-py3-none-any.whl", line, key_->public_key())),
            "pass pass pass fail skip");

  // The payload changed after signing.
  json env = json::parse(line);
  json st = json::parse(*base64_decode(env["payload"].get<std::string>()));
  st["predicate"]["buildDefinition"]["internalParameters"]["sandboxed"] = true;
  env["payload"] = base64_encode(statement_text(st));
  EXPECT_EQ(verdicts(verify(w, name, env.dump(), key_->public_key())), "pass fail skip skip skip");

  // Signed by the key, but the predicate says something kiln.json does not.
  Verification lie = verify(w, name, signed_line(st), key_->public_key());
  EXPECT_EQ(verdicts(lie), "pass pass pass pass fail");
  EXPECT_NE(lie.checks[4].message.find("buildDefinition.internalParameters.sandboxed"),
            std::string::npos)
      << lie.checks[4].message;

  // Signed, but no SLSA statement.
  json not_slsa = st;
  not_slsa["predicateType"] = "https://example.org/other/v1";
  EXPECT_EQ(verdicts(verify(w, name, signed_line(not_slsa), key_->public_key())),
            "pass pass fail skip skip");
  json no_subject = st;
  no_subject["subject"] = json::array();
  EXPECT_EQ(verdicts(verify(w, name, signed_line(no_subject), key_->public_key())),
            "pass pass fail skip skip");
}

TEST_F(AttestWheelTest, ARemotesCopyIsKeptOnlyWhenItNamesTheWheel) {
  fs::path w = wheel(provenance(), "a");
  std::string line = attest(w), sha = sha256_file(w).value(), name = w.filename().string();
  EXPECT_TRUE(names_wheel(line, name, sha));
  EXPECT_TRUE(names_wheel("\n" + line + line, name, sha));
  auto other = names_wheel(line, name, std::string(64, '0'));
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("vouches for"), std::string::npos);
  EXPECT_FALSE(names_wheel(line, "demo-2.0-py3-none-any.whl", sha));
  EXPECT_FALSE(names_wheel("{}", name, sha));
  json not_in_toto = json::parse(line);
  not_in_toto["payloadType"] = "application/json";
  EXPECT_FALSE(names_wheel(not_in_toto.dump(), name, sha));
}

TEST_F(AttestWheelTest, AWheelWithoutKilnJsonIsNotAttested) {
  wheel::WheelSpec spec;
  spec.distribution = "plain";
  spec.version = "1.0";
  spec.tag = "py3-none-any";
  spec.root_is_purelib = true;
  spec.metadata.name = "plain";
  spec.metadata.version = "1.0";
  spec.files = {{"plain/__init__.py", "", false}};
  fs::path w = wheel::write_wheel(spec, dir_.path()).value();
  auto r = attest_wheel(w, w.filename().string(), sha256_file(w).value(), *key_);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("no kiln.json"), std::string::npos);
}

TEST(AttestStatement, FirstDifferenceNamesThePath) {
  json a = {{"x", {{"y", {1, 2, {{"z", 3}}}}}}};
  json b = a;
  EXPECT_EQ(first_difference(a, b), "");
  b["x"]["y"][2]["z"] = 4;
  EXPECT_EQ(first_difference(a, b), "x.y.2.z");
  b = a;
  b["w"] = 1;
  EXPECT_EQ(first_difference(a, b), "w");
  EXPECT_EQ(first_difference(json(1), json("1")), ".");
}

}  // namespace kiln::attest
