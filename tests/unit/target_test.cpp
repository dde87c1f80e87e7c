#include "manifest/target.h"

#include <gtest/gtest.h>

#include <regex>

#include "core/fs.h"
#include "core/strings.h"
#include "manifest/debian_toolkit.h"
#include "manifest/repository.h"
#include "unit/source_dir.h"

namespace kiln::manifest {

namespace fs = std::filesystem;

namespace {

const char* kTarget = R"([target]
description = "test"
archs = "9.0"

[python]
interpreter = "python3"

[torch]
version = "2.11.0"

[[torch.wheel]]
python = "cp311"
file = "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"
sha256 = "7aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a"

[cuda]
toolkit = "system"
version = "13.0"
)";

std::string edit(std::string from, std::string to) {
  std::string text = kTarget;
  auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) text.replace(pos, from.size(), to);
  return text;
}

std::string target_error(const std::string& text) {
  auto t = parse_target(text, "t", "targets/t.toml");
  return t ? std::string("<no error>") : t.error().message;
}

}  // namespace

TEST(Target, ParsesAndDerives) {
  Target t = parse_target(kTarget, "t", "targets/t.toml").value();
  EXPECT_EQ(t.archs.canonical(), "sm_90");
  EXPECT_EQ(t.torch_minor(), "2.11");
  EXPECT_EQ(t.cxx, "g++");
  Target d = with_archs(t, ArchList::parse("9.0;12.0+PTX").value());
  EXPECT_EQ(d.name, "t-sm90-sm120-ptx120");
  EXPECT_NE(d.canonical().dump(), t.canonical().dump());
  // The description does not change the bytes kiln builds.
  EXPECT_EQ(parse_target(edit("\"test\"", "\"other words\""), "t", "x").value().canonical(),
            t.canonical());
}

TEST(Target, BadInput) {
  EXPECT_EQ(target_error(edit("archs = \"9.0\"", "archs = \"9.0;sm_9\"")),
            "targets/t.toml:3:14: bad architecture 'sm_9': expected a two- or three-digit "
            "architecture number such as 90 or 120");
  EXPECT_EQ(target_error(edit("archs = \"9.0\"", "archs = \"12.0+PTX+PTX\"")),
            "targets/t.toml:3:10: bad architecture '12.0+PTX+PTX': only one '+PTX' may follow an "
            "architecture");
  EXPECT_EQ(target_error(edit("archs = \"9.0\"", "archs = \"sm_999\"")),
            "targets/t.toml:3:10: bad architecture 'sm_999': unknown CUDA architecture 999");
  EXPECT_EQ(target_error(edit("version = \"13.0\"", "version = \"13\"")),
            "targets/t.toml:18:11: bad CUDA version '13': expected MAJOR.MINOR such as 13.0");
  EXPECT_EQ(target_error(edit("sha256 = \"7aa2", "sha256 = \"zaa2")),
            "targets/t.toml:14:10: bad sha256 "
            "'zaa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a': expected 64 "
            "lowercase hexadecimal digits");
  EXPECT_EQ(target_error(edit("[cuda]", "[cuda]\nhoem = \"/usr/local/cuda\"")),
            "targets/t.toml:17:1: unknown key 'cuda.hoem' (did you mean 'cuda.home'?)");
  EXPECT_EQ(target_error(edit("file = \"torch-2.11.0-cp311", "file = \"torch-2.10.0-cp311")),
            "targets/t.toml:13:8: 'torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl' is not a "
            "torch 2.11.0 wheel for cp311");
  EXPECT_EQ(target_error(edit("toolkit = \"system\"", "toolkit = \"conda\"")),
            "targets/t.toml:17:11: bad CUDA toolkit 'conda': expected 'system', 'wheels' or "
            "'debian'");
  EXPECT_EQ(target_error(
                edit("interpreter = \"python3\"", "interpreter = \"python3\"\nversion = \"3.11\"")),
            "targets/t.toml:5:1: [python] needs exactly one of 'interpreter' or 'version'");
  EXPECT_EQ(target_error(
                edit("[torch]\nversion = \"2.11.0\"", "[torch]\nversion = \"2.11.0\"\n[torch.x]")),
            "targets/t.toml:10:8: unknown key 'torch.x' (expected one of: source, version, wheel, "
            "index-url)");
}

// [target] manylinux: the compiled wheels' glibc floor, 2_17 to 2_99; absent: -1 (the torch's).
TEST(Target, ManylinuxFloor) {
  EXPECT_EQ(parse_target(kTarget, "t", "x").value().manylinux, -1);
  Target t =
      parse_target(edit("archs = \"9.0\"", "archs = \"9.0\"\nmanylinux = \"2_31\""), "t", "x")
          .value();
  EXPECT_EQ(t.manylinux, 31);
  EXPECT_NE(t.canonical().dump(), parse_target(kTarget, "t", "x").value().canonical().dump());
  for (const char* bad : {"2_16", "2_100", "2.28", "3_28", "2_28_x86_64", "2_", "manylinux_2_28"})
    EXPECT_EQ(
        target_error(edit("archs = \"9.0\"", cat("archs = \"9.0\"\nmanylinux = \"", bad, "\""))),
        cat("targets/t.toml:4:13: bad manylinux floor '", bad,
            "': expected a glibc version as 2_<minor>, 2_17 to 2_99, e.g. \"2_28\""))
        << bad;
  EXPECT_EQ(wheel_manylinux_floor("torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl"), 28);
  EXPECT_EQ(wheel_manylinux_floor(
                "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"),
            17);
  EXPECT_EQ(wheel_manylinux_floor("torch-2.11.0-cp311-cp311-win_amd64.whl"), -1);
  EXPECT_EQ(wheel_manylinux_floor("torch.whl"), -1);
}

TEST(Target, CudaWheels) {
  const std::string wheels = R"([cuda]
toolkit = "wheels"
version = "13.0"

[[cuda.wheel]]
file = "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
sha256 = "56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03"

[[cuda.wheel]]
file = "nvidia_cuda_cccl-13.0.85-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
sha256 = "e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649"
)";
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = kTarget;
    text = text.substr(0, text.find("[cuda]")) + wheels;
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
    return text;
  };
  Target t = parse_target(with("", ""), "t", "targets/t.toml").value();
  ASSERT_EQ(t.cuda_wheels.size(), 2u);
  EXPECT_EQ(t.cuda_wheels[0].project(), "nvidia-cuda-nvcc");
  EXPECT_EQ(t.cuda_wheels[1].project(), "nvidia-cuda-cccl");
  EXPECT_EQ(t.canonical()["cuda"]["wheels"][1]["sha256"],
            "e0da7ad981f3a8aff08241b5bfc1af868742a63e2762f53a5171c492ef242649");
  // Another pin is another target as far as the bytes go.
  Target other = parse_target(with("e0da7", "f0da7"), "t", "x").value();
  EXPECT_NE(other.canonical(), t.canonical());
  // The system toolkit's canonical form has no wheels (its keys stay as they were).
  EXPECT_FALSE(parse_target(kTarget, "t", "x").value().canonical()["cuda"].contains("wheels"));

  EXPECT_EQ(target_error(with("[[cuda.wheel]]", "[[cuda.whl]]")),
            "targets/t.toml:20:8: unknown key 'cuda.whl' (did you mean 'cuda.wheel'?)");
  std::string none = kTarget;
  none.replace(none.find("toolkit = \"system\""), 18, "toolkit = \"wheels\"");
  EXPECT_EQ(target_error(none), "targets/t.toml:16:1: missing required key 'cuda.wheel' in [cuda]");
  EXPECT_EQ(target_error(with("toolkit = \"wheels\"", "toolkit = \"system\"")),
            "targets/t.toml:20:1: 'cuda.wheel' applies only to toolkit = \"wheels\"");
  EXPECT_EQ(target_error(with(
                "nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
                "nvcc.tar.gz")),
            "targets/t.toml:21:8: 'nvcc.tar.gz' is not a wheel file name "
            "(NAME-VERSION-PY-ABI-PLATFORM.whl)");
  EXPECT_EQ(target_error(with("sha256 = \"56fe", "sha256 = \"56FE")),
            "targets/t.toml:22:10: bad sha256 "
            "'56FE502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03': expected 64 "
            "lowercase hexadecimal digits");
  EXPECT_EQ(target_error(with("nvidia_cuda_cccl-13.0.85", "nvidia_cuda_nvcc-13.0.48")),
            "targets/t.toml:25:8: a second wheel of nvidia-cuda-nvcc "
            "(nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl)");
  EXPECT_EQ(
      target_error(with("version = \"13.0\"\n\n", "version = \"13.0\"\nhome = \"/opt/cuda\"\n\n")),
      "targets/t.toml:19:8: 'cuda.home' applies only to the system toolkit");
}

// Strings of 60 KB and 1 MB where a regular expression once checked a target (std::regex
// overflowed the stack on them: SIGSEGV): located errors naming the cap, or the ordinary error.
TEST(Target, LongStringsGetLocatedErrors) {
  const std::string kb60(60000, '1'), mb(1 << 20, '1');
  EXPECT_EQ(target_error(edit("version = \"2.11.0\"", "version = \"2." + kb60 + "\"")),
            "targets/t.toml:9:11: 'torch.version' is longer than 128 bytes");
  EXPECT_EQ(target_error(edit("version = \"2.11.0\"", "version = \"2." + mb + "\"")),
            "targets/t.toml:9:11: 'torch.version' is longer than 65536 bytes");
  EXPECT_EQ(target_error(edit("version = \"13.0\"", "version = \"" + mb + "\"")),
            "targets/t.toml:18:11: 'cuda.version' is longer than 65536 bytes");
  EXPECT_EQ(target_error(edit("interpreter = \"python3\"", "interpreter = \"" + mb + "\"")),
            "targets/t.toml:6:15: 'python.interpreter' is longer than 65536 bytes");
  EXPECT_EQ(target_error(edit("description = \"test\"", "description = \"" + mb + "\"")),
            "targets/t.toml:2:15: 'target.description' is longer than 65536 bytes");
  // Under the cap on any string, the field's own check (linear now) refuses it.
  std::string cuda = target_error(edit("version = \"13.0\"", "version = \"" + kb60 + "\""));
  EXPECT_EQ(cuda.rfind("targets/t.toml:18:11: bad CUDA version '", 0), 0u) << cuda.substr(0, 80);
  std::string python =
      target_error(edit("interpreter = \"python3\"", "version = \"3." + kb60 + "\""));
  EXPECT_EQ(python.rfind("targets/t.toml:6:11: bad Python version '3.", 0), 0u)
      << python.substr(0, 80);
  std::string tag = target_error(edit("python = \"cp311\"", "python = \"cp3" + kb60 + "\""));
  EXPECT_EQ(tag.rfind("targets/t.toml:12:10: bad Python tag 'cp3", 0), 0u) << tag.substr(0, 80);
  // The target's name (its file's stem, or --target NAME).
  auto named = parse_target(kTarget, std::string(1 << 20, 'a'), "targets/a.toml");
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error().message, "targets/a.toml: target name '" + std::string(60, 'a') +
                                       "...' is longer than 128 bytes");
  EXPECT_TRUE(parse_target(kTarget, std::string(128, 'a'), "targets/a.toml"));
}

TEST(Target, MatchersAgreeWithTheRegularExpressionsTheyReplaced) {
  const std::regex name(R"(^[a-z0-9][a-z0-9._-]*$)");
  for (std::string s : {"default", "a", "0", "a.b_c-d", "-a", ".a", "_a", "A", "aB", "a b", "",
                        "a/b", "a\n", "torch2.10-cu128", "9-", "\xc3\xa4"})
    EXPECT_EQ(is_valid_target_name(s), std::regex_match(s, name)) << "'" << s << "'";
  const std::regex py(R"(^3\.[0-9]{1,2}$)"), tag(R"(^cp3[0-9]{1,2}t?$)"),
      cuda(R"(^[0-9]{2}\.[0-9]$)");
  for (std::string s :
       {"3.1", "3.11", "3.111", "3.", "3", "2.7", "3.1a", "3,11", " 3.11", "3.11\n", "", "3.x"})
    EXPECT_EQ(is_python_version(s), std::regex_match(s, py)) << "'" << s << "'";
  for (std::string s : {"cp3", "cp31", "cp311", "cp3111", "cp311t", "cp31t", "cp3t", "cp311tt",
                        "cp311T", "cp211", "cp311 ", "py311", "", "t", "cp31a"})
    EXPECT_EQ(is_cpython_tag(s), std::regex_match(s, tag)) << "'" << s << "'";
  for (std::string s : {"13.0", "12.8", "1.0", "130", "13.00", "13.", "13,0", "a3.0", "13.0\n", "",
                        "13.x", "113.0"})
    EXPECT_EQ(is_cuda_version(s), std::regex_match(s, cuda)) << "'" << s << "'";
  // 1 MB each, decided in one pass.
  const std::string mb(1 << 20, 'a');
  EXPECT_TRUE(is_valid_target_name(mb));
  EXPECT_FALSE(is_python_version("3." + mb));
  EXPECT_FALSE(is_cpython_tag("cp3" + mb));
  EXPECT_FALSE(is_cuda_version(mb));
}

TEST(Target, TorchFromAnotherIndexWithALocalLabel) {
  std::string text = edit("version = \"2.11.0\"\n",
                          "version = \"2.11.0+cu128\"\nindex-url = "
                          "\"https://download.pytorch.org/whl/cu128\"\n");
  std::string fixed = text;
  fixed.replace(fixed.find("torch-2.11.0-cp311"), 18, "torch-2.11.0+cu128-cp311");
  Target t = parse_target(fixed, "t", "t.toml").value();
  EXPECT_EQ(t.torch_version, "2.11.0+cu128");
  EXPECT_EQ(t.torch_minor(), "2.11");
  EXPECT_EQ(t.torch_index_url, "https://download.pytorch.org/whl/cu128");
  // The pinned file must carry the label too.
  EXPECT_NE(target_error(text).find("is not a torch 2.11.0+cu128 wheel"), std::string::npos);
  EXPECT_NE(target_error(edit("version = \"2.11.0\"\n", "version = \"2.11.0+CU128\"\n"))
                .find("bad torch version"),
            std::string::npos);
  for (const char* url : {"ftp://x/", "https://x/ y", "https://x/\"", "file:///tmp/x"})
    EXPECT_NE(target_error(edit("version = \"2.11.0\"\n",
                                cat("version = \"2.11.0\"\nindex-url = '", url, "'\n")))
                  .find("bad index URL"),
              std::string::npos)
        << url;
  // Not a key input: the sha256 pins the bytes.
  EXPECT_EQ(t.canonical().dump().find("download.pytorch.org"), std::string::npos);
}

TEST(Target, ShippedTargetsParse) {
  for (const char* name : {"default", "default-wheels-cu130", "torch2.10-cu128"}) {
    fs::path file = fs::path(kiln::test::source_dir()) / "manifests" / "targets" /
                    (std::string(name) + ".toml");
    Target t = load_target(file, file.string()).value();
    EXPECT_EQ(t.name, name);
  }
  Target w =
      load_target(
          fs::path(kiln::test::source_dir()) / "manifests/targets/default-wheels-cu130.toml", "w")
          .value();
  EXPECT_EQ(w.cuda_toolkit, ToolkitKind::Wheels);
  EXPECT_EQ(w.cuda_wheels.size(), 5u);
}

namespace {

const char* kDebPath =
    "pool/non-free/n/nvidia-cuda-toolkit/nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb";

std::string debian_target(const std::string& path, const std::string& extra = "") {
  return edit("toolkit = \"system\"\nversion = \"13.0\"\n",
              cat("toolkit = \"debian\"\nversion = \"12.8\"\n", extra, "\n[[cuda.deb]]\npath = \"",
                  path, "\"\nsha256 = \"", std::string(64, 'c'), "\"\n"));
}

}  // namespace

TEST(Target, DebianToolkit) {
  Target t = parse_target(debian_target(kDebPath), "t", "targets/t.toml").value();
  EXPECT_EQ(t.cuda_toolkit, ToolkitKind::Debian);
  ASSERT_EQ(t.cuda_debs.size(), 1u);
  EXPECT_EQ(t.cuda_debs[0].file(), "nvidia-cuda-toolkit_12.4.131~12.4.1-2_amd64.deb");
  EXPECT_EQ(t.cuda_debs[0].package(), "nvidia-cuda-toolkit");
  EXPECT_EQ(t.canonical()["cuda"]["debs"][0]["path"], kDebPath);
  // Other toolkits' canonical form is unchanged (no "debs" key): their build keys stay.
  EXPECT_FALSE(parse_target(kTarget, "t", "t").value().canonical()["cuda"].contains("debs"));
}

TEST(Target, DebianPoolPathsAreStrict) {
  // The value starts at column 8 of line 21 (path = "...").
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"pool/main/../../../etc/x.deb", "has an empty, '.' or '..' component"},
      {"pool//main/x.deb", "has an empty, '.' or '..' component"},
      {"pool/./x.deb", "has an empty, '.' or '..' component"},
      {"/pool/main/x.deb", "starting with pool/"},
      {"dists/trixie/x.deb", "starting with pool/"},
      {"http://deb.debian.org/debian/pool/x.deb", "starting with pool/"},
      {"pool/main/x y.deb", "only letters, digits and . + ~ _ - / are allowed"},
      {"pool/main/x%2e.deb", "only letters, digits and . + ~ _ - / are allowed"},
      {"pool/main/x.tar.xz", "expected a .deb file"},
      {"pool/main/.deb", "expected a .deb file"},
      {"pool/" + std::string(300, 'a') + ".deb", "longer than 255 bytes"},
  };
  for (const auto& [path, why] : bad) {
    std::string e = target_error(debian_target(path));
    EXPECT_TRUE(e.starts_with("targets/t.toml:21:8: bad pool path")) << e;
    EXPECT_NE(e.find(why), std::string::npos) << e;
  }
  std::string why;
  EXPECT_TRUE(is_debian_pool_path("pool/main/c/cccl/libcu++-dev_2.3.2-2_all.deb", why)) << why;
}

TEST(Target, DebianToolkitKeysBelongTogether) {
  EXPECT_NE(target_error(edit("toolkit = \"system\"", "toolkit = \"debian\""))
                .find("missing required key 'cuda.deb'"),
            std::string::npos)
      << target_error(edit("toolkit = \"system\"", "toolkit = \"debian\""));
  EXPECT_NE(target_error(debian_target(kDebPath, "home = \"/usr/local/cuda\"\n"))
                .find("'cuda.home' applies only to the system toolkit"),
            std::string::npos);
  std::string twice =
      debian_target(kDebPath) +
      cat("\n[[cuda.deb]]\npath = \"", kDebPath, "\"\nsha256 = \"", std::string(64, 'd'), "\"\n");
  EXPECT_NE(target_error(twice).find("a second package nvidia-cuda-toolkit"), std::string::npos)
      << target_error(twice);
  std::string wheel = debian_target(kDebPath) +
                      "\n[[cuda.wheel]]\nfile = \"a-1-py3-none-any.whl\"\nsha256 = \"" +
                      std::string(64, 'e') + "\"\n";
  EXPECT_NE(target_error(wheel).find("'cuda.wheel' applies only to toolkit = \"wheels\""),
            std::string::npos)
      << target_error(wheel);
  std::string deb_on_system = kTarget + cat("\n[[cuda.deb]]\npath = \"", kDebPath,
                                            "\"\nsha256 = \"", std::string(64, 'c'), "\"\n");
  EXPECT_NE(target_error(deb_on_system).find("'cuda.deb' applies only to toolkit = \"debian\""),
            std::string::npos)
      << target_error(deb_on_system);
  std::string short_sha = debian_target(kDebPath);
  short_sha.replace(short_sha.find(std::string(64, 'c')), 64, "abc");
  EXPECT_NE(target_error(short_sha).find("bad sha256 'abc'"), std::string::npos);
  EXPECT_NE(target_error(edit("toolkit = \"system\"", "toolkit = \"apt\""))
                .find("expected 'system', 'wheels' or 'debian'"),
            std::string::npos);
}

TEST(Target, BuiltInDebianPinsMatchTheShippedTarget) {
  DebianToolkitPins pins = builtin_debian_toolkit().value();
  EXPECT_EQ(pins.release, "12.4");
  EXPECT_EQ(pins.suite, "trixie");
  EXPECT_EQ(pins.debs.size(), 7u);
  Target t = load_target(
                 fs::path(kiln::test::source_dir()) / "manifests/targets/torch2.10-cu128.toml", "t")
                 .value();
  EXPECT_EQ(t.cuda_toolkit, ToolkitKind::Debian);
  EXPECT_EQ(t.cuda_version, "12.8");
  ASSERT_EQ(t.cuda_debs.size(), pins.debs.size());
  for (std::size_t i = 0; i < pins.debs.size(); ++i) {
    EXPECT_EQ(t.cuda_debs[i].path, pins.debs[i].path);
    EXPECT_EQ(t.cuda_debs[i].sha256, pins.debs[i].sha256);
  }
  // The [cuda] table written from the pins parses into the same target.
  std::string text = kTarget;
  text.replace(text.find("[cuda]"), std::string::npos, debian_cuda_table(pins, "12.8"));
  Target w = parse_target(text, "w", "w").value();
  EXPECT_EQ(w.cuda_debs.size(), 7u);
  EXPECT_EQ(w.canonical()["cuda"]["debs"], t.canonical()["cuda"]["debs"]);
  // The file on disk is the built-in copy.
  EXPECT_EQ(
      read_file(fs::path(kiln::test::source_dir()) / "manifests/tools/cuda12-debian.toml").value(),
      kEmbeddedDebianToolkit);
  EXPECT_FALSE(parse_debian_toolkit("release = \"12.4\"\nsuite = \"trixie\"\n", "x"));
  EXPECT_FALSE(parse_debian_toolkit(
      "release = \"12.4\"\nsuite = \"t\"\n[[deb]]\npath = \"pool/../x.deb\"\nsha256 = \"" +
          std::string(64, 'a') + "\"\n",
      "x"));
}

TEST(Target, EmbeddedDefaultIsValid) {
  Target t = parse_target(kEmbeddedDefaultTarget, "default", "<built-in>").value();
  EXPECT_EQ(t.archs.canonical(), "sm_90");
  EXPECT_EQ(t.torch_version, "2.11.0");
  EXPECT_EQ(t.cuda_version, "13.0");
}

}  // namespace kiln::manifest
