#include "wheel/provenance.h"

#include <gtest/gtest.h>

#include "core/fs.h"
#include "toolchain/torch.h"
#include "unit/source_dir.h"

namespace kiln::wheel {

namespace {

using json = nlohmann::json;

std::string fixture(const std::string& name) {
  return read_file(std::filesystem::path(kiln::test::source_dir()) / "tests/data/provenance" / name)
      .value();
}

// What the pipeline wrote before Provenance existed (builder/pipeline/pipeline.cpp at c60b591:
// build_item, finish_compiled, build_setuptools_item), for the same facts.
json old_provenance(const std::string& backend, const json& inputs) {
  json provenance = {{"kiln", "0.1.0"},
                     {"recipe", 4},
                     {"build_key", std::string(64, 'a')},
                     {"backend", backend},
                     {"inputs", inputs}};
  if (backend == "pure") return provenance;
  json torch_identity = {{"version", "2.11.0+cu130"},
                         {"cuda", "13.0"},
                         {"cxx11_abi", true},
                         {"abi_flags", std::vector<std::string>{}},
                         {"sha256", std::string(64, 'b')}};
  provenance["archs"] = "sm_90;sm_120+ptx";
  provenance["tools"] = {{"nvcc", "nvcc: NVIDIA (R) Cuda compiler driver\nrelease 13.0\n"},
                         {"cxx", "g++ (Debian 12.2.0-14+deb12u1) 12.2.0"},
                         {"python", "3.11.7"},
                         {"torch", torch_identity}};
  provenance["platform"] = {{"tag", "manylinux_2_34_x86_64"},
                            {"limited_by", "GLIBC_2.32"},
                            {"highest", std::vector<std::string>{"GLIBC_2.32", "GLIBCXX_3.4.21"}}};
  if (backend == "setuptools")
    provenance["setuptools"] = {{"built_wheel", "demo-1.0-cp311-cp311-linux_x86_64.whl"},
                                {"torch_cuda_arch_list", "9.0;12.0+PTX"}};
  return provenance;
}

// The same facts through the struct, as the pipeline now fills it.
Provenance new_provenance(const std::string& backend, const json& inputs) {
  Provenance p;
  p.kiln = "0.1.0";
  p.recipe = 4;
  p.build_key = std::string(64, 'a');
  p.backend = backend;
  p.inputs = inputs;
  if (backend == "pure") return p;
  p.archs = "sm_90;sm_120+ptx";
  p.tools = BuiltTools{"nvcc: NVIDIA (R) Cuda compiler driver\nrelease 13.0\n",
                       "g++ (Debian 12.2.0-14+deb12u1) 12.2.0",
                       "3.11.7",
                       {"2.11.0+cu130", "13.0", true, {}, std::string(64, 'b')}};
  p.platform =
      BuiltPlatform{"manylinux_2_34_x86_64", "GLIBC_2.32", {"GLIBC_2.32", "GLIBCXX_3.4.21"}};
  if (backend == "setuptools")
    p.setuptools = SetuptoolsBuild{"demo-1.0-cp311-cp311-linux_x86_64.whl", "9.0;12.0+PTX"};
  return p;
}

// The message parse_provenance gives for the native fixture with `pointer` set to `value`.
std::string refused(const std::string& pointer, const json& value) {
  json j = json::parse(fixture("native.json"));
  j[json::json_pointer(pointer)] = value;
  auto p = parse_provenance(j.dump());
  if (p) return "(parsed)";
  EXPECT_EQ(p.error().kind, ErrorKind::BadInput);
  return p.error().message;
}

}  // namespace

// native.json and pure.json are kiln.json files of wheels kiln built (causal-conv1d 1.7.0 and
// flash-linear-attention 0.6.0); setuptools.json is native.json with a setuptools build's fields
// added (Python's json.dumps(indent=2, sort_keys=True, ensure_ascii=False), which gives the other
// two byte for byte).
TEST(Provenance, RealFilesRoundTripToTheSameBytes) {
  for (const char* name : {"native.json", "setuptools.json", "pure.json"}) {
    std::string text = fixture(name);
    Provenance p = parse_provenance(text).value();
    EXPECT_EQ(provenance_text(p), text) << name;
  }
  Provenance native = parse_provenance(fixture("native.json")).value();
  EXPECT_EQ(native.backend, "native");
  EXPECT_EQ(native.recipe, 4);
  EXPECT_EQ(native.archs, "sm_90");
  ASSERT_TRUE(native.tools && native.platform);
  EXPECT_EQ(native.tools->torch.version, "2.11.0+cu130");
  EXPECT_TRUE(native.tools->torch.cxx11_abi);
  EXPECT_EQ(native.platform->limited_by, "GLIBC_2.32");
  EXPECT_FALSE(native.setuptools);
  ASSERT_TRUE(native.facts.python && native.facts.torch && native.facts.cuda);
  EXPECT_EQ(native.facts.python->abi_tag, "cp311");
  EXPECT_EQ(native.facts.python->ext_suffix, ".cpython-311-x86_64-linux-gnu.so");
  EXPECT_EQ(native.facts.torch->file, "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl");
  EXPECT_EQ(native.facts.cuda->toolkit, "system");
  EXPECT_FALSE(native.facts.cuda->wheels);
  EXPECT_EQ(native.facts.target_cuda, "13.0");

  Provenance setuptools = parse_provenance(fixture("setuptools.json")).value();
  ASSERT_TRUE(setuptools.setuptools);
  EXPECT_EQ(setuptools.setuptools->torch_cuda_arch_list, "9.0");

  Provenance pure = parse_provenance(fixture("pure.json")).value();
  EXPECT_EQ(pure.backend, "pure");
  EXPECT_FALSE(pure.archs || pure.tools || pure.platform || pure.setuptools);
  EXPECT_FALSE(pure.facts.python || pure.facts.torch || pure.facts.cuda || pure.facts.target_cuda);
}

TEST(Provenance, WrittenAsThePipelineWroteIt) {
  json inputs = json::parse(fixture("native.json"))["inputs"];
  for (const char* backend : {"native", "setuptools", "pure"}) {
    std::string before = old_provenance(backend, inputs).dump(2) + "\n";
    Provenance p = new_provenance(backend, inputs);
    EXPECT_EQ(provenance_text(p), before) << backend;
    EXPECT_EQ(provenance_text(parse_provenance(before).value()), before) << backend;
  }
}

// The pipeline records tools.torch field by field from the sysroot: the same object as its
// identity(), which it was before (a field added to identity() must be added to BuiltTorch).
TEST(Provenance, BuiltTorchIsTheSysrootsIdentity) {
  toolchain::TorchSysroot t;
  t.version = "2.11.0+cu130";
  t.cuda = "13.0";
  t.cxx11_abi = false;
  t.pass_abi_define = true;
  t.identity_sha256 = std::string(64, 'c');
  Provenance p;
  p.tools =
      BuiltTools{"", "", "", {t.version, t.cuda, t.cxx11_abi, t.abi_flags(), t.identity_sha256}};
  EXPECT_EQ(to_json(p)["tools"]["torch"], t.identity());
}

TEST(Provenance, WrongTypesAreRefusedNamingTheField) {
  EXPECT_EQ(refused("/tools", {{"torch", "2.11"}}),
            "kiln.json: tools.torch is a string, not an object");
  EXPECT_EQ(refused("/inputs/toolchain/python", "3.11"),
            "kiln.json: inputs.toolchain.python is a string, not an object");
  EXPECT_EQ(refused("/inputs/target/cuda", "13.0"),
            "kiln.json: inputs.target.cuda is a string, not an object");
  EXPECT_EQ(refused("/inputs/target/cuda/version", 13),
            "kiln.json: inputs.target.cuda.version is an integer, not a string");
  EXPECT_EQ(refused("/inputs/toolchain/torch/sha256", nullptr),
            "kiln.json: inputs.toolchain.torch.sha256 is null, not a string");
  EXPECT_EQ(refused("/inputs/toolchain/cuda/wheels", "x"),
            "kiln.json: inputs.toolchain.cuda.wheels is a string, not an array");
  EXPECT_EQ(refused("/inputs/toolchain/cuda/wheels", {1}),
            "kiln.json: inputs.toolchain.cuda.wheels[0] is an integer, not an object");
  EXPECT_EQ(refused("/inputs/toolchain", json::array()),
            "kiln.json: inputs.toolchain is an array, not an object");
  EXPECT_EQ(refused("/inputs", "x"), "kiln.json: inputs is a string, not an object");
  EXPECT_EQ(refused("/recipe", "4"), "kiln.json: recipe is a string, not an integer");
  EXPECT_EQ(refused("/recipe", 4.5), "kiln.json: recipe is a number, not an integer");
  EXPECT_EQ(refused("/recipe", 1ULL << 40), "kiln.json: recipe is out of range");
  EXPECT_EQ(refused("/kiln", true), "kiln.json: kiln is a boolean, not a string");
  EXPECT_EQ(refused("/archs", 90), "kiln.json: archs is an integer, not a string");
  EXPECT_EQ(refused("/tools/nvcc", json::object()),
            "kiln.json: tools.nvcc is an object, not a string");
  EXPECT_EQ(refused("/tools/torch/version", 2.11),
            "kiln.json: tools.torch.version is a number, not a string");
  EXPECT_EQ(refused("/tools/torch/cxx11_abi", "yes"),
            "kiln.json: tools.torch.cxx11_abi is a string, not a boolean");
  EXPECT_EQ(refused("/tools/torch/abi_flags", "-D"),
            "kiln.json: tools.torch.abi_flags is a string, not an array of strings");
  EXPECT_EQ(refused("/platform/highest/1", 3),
            "kiln.json: platform.highest[1] is an integer, not a string");
  EXPECT_EQ(refused("/platform", "manylinux"), "kiln.json: platform is a string, not an object");
  EXPECT_EQ(refused("/setuptools", json::array()),
            "kiln.json: setuptools is an array, not an object");
  EXPECT_EQ(refused("/setuptools", {{"built_wheel", 1}}),
            "kiln.json: setuptools.built_wheel is an integer, not a string");
  EXPECT_EQ(parse_provenance("[1]").error().message, "kiln.json is an array, not an object");
  EXPECT_EQ(parse_provenance(std::string_view("{\"kiln\": ")).error().message,
            "kiln.json is not valid JSON");
}

// Format 2: the host facts in "tools" and the "rebuild" recipe, whose patch bytes (any bytes, not
// only UTF-8) come back exactly.
TEST(Provenance, Format2CarriesHostFactsAndTheRebuildRecipe) {
  Provenance p = new_provenance("native", json::parse(fixture("native.json"))["inputs"]);
  p.format = kProvenanceFormat;
  p.tools->ld = "GNU ld (GNU Binutils for Debian) 2.40";
  p.tools->glibc = "2.36";
  p.tools->cuda_include = std::string(64, 'd');
  RebuildRecipe r;
  r.kiln_commit = "0123456789ab";
  r.source_url = "https://example.org/x-1.0.tar.gz";
  r.source_size = 1ULL << 33;
  r.torch_index_url = "https://download.pytorch.org/whl/cu128";
  r.patches = {{"0001-a.patch", std::string(64, 'e'), "--- a/x\n+++ b/x\n"},
               {"0002-b.patch", std::string(64, 'f'), std::string("\xff\x00\xfe\n", 4)}};
  p.rebuild = r;
  std::string text = provenance_text(p);
  json j = json::parse(text);
  EXPECT_EQ(j["format"], 2);
  EXPECT_EQ(j["tools"]["glibc"], "2.36");
  EXPECT_EQ(j["rebuild"]["patches"][1]["base64"], "/wD+Cg==");
  EXPECT_EQ(j["rebuild"]["source"]["size"], 1ULL << 33);
  Provenance back = parse_provenance(text).value();
  EXPECT_EQ(provenance_text(back), text);
  EXPECT_EQ(back.format, 2);
  ASSERT_TRUE(back.tools && back.rebuild);
  EXPECT_EQ(back.tools->ld, "GNU ld (GNU Binutils for Debian) 2.40");
  EXPECT_EQ(back.tools->cuda_include, std::string(64, 'd'));
  EXPECT_EQ(back.rebuild->kiln_commit, "0123456789ab");
  EXPECT_EQ(back.rebuild->source_url, r.source_url);
  EXPECT_EQ(back.rebuild->source_size, r.source_size);
  EXPECT_EQ(back.rebuild->torch_index_url, r.torch_index_url);
  ASSERT_EQ(back.rebuild->patches.size(), 2u);
  EXPECT_EQ(back.rebuild->patches[1].bytes, std::string("\xff\x00\xfe\n", 4));
  EXPECT_EQ(back.rebuild->patches[0].name, "0001-a.patch");
  // Format 1 (the fixtures): no "format", no host facts, no rebuild recipe.
  Provenance old = parse_provenance(fixture("native.json")).value();
  EXPECT_EQ(old.format, 1);
  EXPECT_FALSE(old.rebuild);
  EXPECT_TRUE(old.tools->ld.empty());
}

TEST(Provenance, ABrokenRebuildRecipeIsRefusedNamingTheField) {
  json j = json::parse(fixture("native.json"));
  j["format"] = 2;
  j["rebuild"] = {{"patches", {{{"name", "p"}, {"sha256", "x"}, {"base64", "not base64!"}}}}};
  EXPECT_EQ(parse_provenance(j.dump()).error().message,
            "kiln.json: rebuild.patches[0].base64 is not base64");
  j["rebuild"] = {{"source", {{"size", "12"}}}};
  EXPECT_EQ(parse_provenance(j.dump()).error().message,
            "kiln.json: rebuild.source.size is a string, not a size in bytes");
  j["rebuild"] = {{"source", {{"size", -1}}}};
  EXPECT_EQ(parse_provenance(j.dump()).error().message,
            "kiln.json: rebuild.source.size is an integer, not a size in bytes");
  j["rebuild"] = {{"patches", "0001.patch"}};
  EXPECT_EQ(parse_provenance(j.dump()).error().message,
            "kiln.json: rebuild.patches is a string, not an array");
  j["rebuild"] = 1;
  EXPECT_EQ(parse_provenance(j.dump()).error().message,
            "kiln.json: rebuild is an integer, not an object");
}

TEST(Provenance, AbsentFieldsAreEmpty) {
  Provenance p = parse_provenance(std::string_view(R"({"archs": "sm_90"})")).value();
  EXPECT_EQ(p.archs, "sm_90");
  EXPECT_TRUE(p.kiln.empty() && p.build_key.empty() && p.inputs.is_null());
  EXPECT_FALSE(p.tools || p.platform || p.setuptools || p.facts.python);
  // Keys kiln does not write are ignored; inputs keep theirs (they are hashed as they are).
  Provenance q = parse_provenance(std::string_view(
                                      R"({"inputs": {"toolchain": {"torch": {"environment": "py",
                                          "identity": {}}}}, "other": 1})"))
                     .value();
  ASSERT_TRUE(q.facts.torch);
  EXPECT_TRUE(q.facts.torch->file.empty());
  EXPECT_EQ(q.inputs["toolchain"]["torch"]["environment"], "py");
}

}  // namespace kiln::wheel
