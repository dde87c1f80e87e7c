// doctor: the embedded doctor.py, running it, the GPUs of a report, the static checks kiln adds
// under "kiln" and the human report.
#include "doctor/doctor.h"

#include <gtest/gtest.h>

#include <fstream>

#include "../support/expect.h"
#include "core/fs.h"
#include "core/process.h"
#include "core/strings.h"
#include "unit/source_dir.h"

namespace kiln::doctor {
namespace {

TEST(Doctor, EmbedsDoctorPyVerbatim) {
  std::string file =
      read_file(fs::path(kiln::test::source_dir()) / "builder/doctor/doctor.py").value();
  EXPECT_EQ(script(), file);
  EXPECT_TRUE(script().starts_with("#!/usr/bin/env python3\n"));
}

TEST(Doctor, GpusOfAReport) {
  auto report = nlohmann::json::parse(R"({"gpus": [{"cc": "9.0"}, {"cc": "12.0"}, {"cc": "9.0"},
      {"cc": "x.0"}, {"cc": "123.0"}, {"cc": "9.10"}, {"cc": 9}, {}, 3]})");
  auto gpus = report_gpus(report);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].sm_name(), "sm_90");
  EXPECT_EQ(gpus[1].sm_name(), "sm_120");
  EXPECT_TRUE(report_gpus(nlohmann::json::parse(R"({"gpus": "none"})")).empty());
  EXPECT_TRUE(report_gpus(nlohmann::json::array()).empty());
}

nlohmann::json sample(bool active) {
  nlohmann::json r = nlohmann::json::parse(R"j({
    "doctor_version": 1,
    "summary": [["python", "/usr/bin/python3 3.12.3 (cp312), glibc 2.39"],
                ["gpu 0", "NVIDIA H200, sm_90 (compute capability 9.0)"]],
    "next": {"argv_for": {"fast_path": [["kiln", "target", "init", "--name", "t"],
                                        ["kiln", "serve", "--host", "0.0.0.0"]]}}
  })j");
  r["fast_path"] = {{"active", active}, {"reasons", nlohmann::json::array()}};
  if (!active) r["fast_path"]["reasons"].push_back("causal_conv1d not installed: uv pip install x");
  return r;
}

TEST(Doctor, RendersAlignedRowsTheFastPathAndTheNextCommands) {
  EXPECT_EQ(render_text(sample(false)),
            "python  /usr/bin/python3 3.12.3 (cp312), glibc 2.39\n"
            "gpu 0   NVIDIA H200, sm_90 (compute capability 9.0)\n"
            "fast path: missing (causal_conv1d not installed: uv pip install x)\n"
            "next:\n"
            "  kiln target init --name t\n"
            "  kiln serve --host 0.0.0.0\n");
  EXPECT_EQ(render_text(sample(true)),
            "python  /usr/bin/python3 3.12.3 (cp312), glibc 2.39\n"
            "gpu 0   NVIDIA H200, sm_90 (compute capability 9.0)\n"
            "fast path: active\n");
  // kiln's section decides: its rows join the table and its fast path replaces doctor.py's.
  nlohmann::json r = sample(true);
  r["kiln"] = nlohmann::json::parse(R"j({"installed": [
      {"name": "causal-conv1d", "checks": [
        {"id": "installed", "verdict": "pass", "message": "4 files"},
        {"id": "torch-abi", "verdict": "pass", "message": "ok"},
        {"id": "gpu-code", "verdict": "pass", "message": "SASS sm_120"},
        {"id": "gpu-target", "gpu": "sm_90", "verdict": "fail", "message": "will not run on sm_90"}]},
      {"name": "kiln-demo", "error": "no such dist-info directory"}],
    "fast_path": {"active": false, "reasons": ["causal-conv1d gpu-target: will not run on sm_90"]}})j");
  EXPECT_EQ(render_text(r),
            "python                  /usr/bin/python3 3.12.3 (cp312), glibc 2.39\n"
            "gpu 0                   NVIDIA H200, sm_90 (compute capability 9.0)\n"
            "causal-conv1d (static)  torch-abi pass, gpu-target sm_90 fail: will not run on sm_90\n"
            "kiln-demo (static)      not checked: no such dist-info directory\n"
            "fast path: missing (causal-conv1d gpu-target: will not run on sm_90)\n"
            "next:\n"
            "  kiln target init --name t\n"
            "  kiln serve --host 0.0.0.0\n");
  // A report of the wrong shape renders what it can, without throwing.
  EXPECT_EQ(render_text(nlohmann::json::parse(R"({"summary": [1, ["a"]], "kiln": 3})")),
            "fast path: missing ()\nnext:\n");
}

TEST(Doctor, RendersTheMamba2FastPathBesideTheGatedDeltaNetOne) {
  nlohmann::json r = sample(true);
  r["mamba2_fast_path"] = nlohmann::json::parse(
      R"({"active": false, "reasons": ["mamba_ssm not installed: pip install m", "torch x"]})");
  EXPECT_EQ(render_text(r),
            "python  /usr/bin/python3 3.12.3 (cp312), glibc 2.39\n"
            "gpu 0   NVIDIA H200, sm_90 (compute capability 9.0)\n"
            "fast path: active\n"
            "Mamba-2 fast path: missing (mamba_ssm not installed: pip install m; torch x)\n"
            "next:\n"
            "  kiln target init --name t\n"
            "  kiln serve --host 0.0.0.0\n");
  // The next commands are those doctor.py wrote for the paths that are missing.
  auto one = [](const char* a, const char* b) {
    return nlohmann::json::array({nlohmann::json::array({a, b})});
  };
  r["next"]["argv_for"] = {{"fast_path", one("build", "gdn")},
                           {"mamba2_fast_path", one("build", "mamba")},
                           {"fast_path+mamba2_fast_path", one("build", "both")}};
  EXPECT_CONTAINS(render_text(r), "next:\n  build mamba\n");
  r["fast_path"] = {{"active", false}, {"reasons", {"b"}}};
  EXPECT_CONTAINS(render_text(r), "next:\n  build both\n");
  r["mamba2_fast_path"]["active"] = true;
  EXPECT_CONTAINS(render_text(r), "next:\n  build gdn\n");
  r["next"]["argv_for"] = {{"fast_path", "not a list"}};  // nothing doctor.py's text could forge
  EXPECT_TRUE(render_text(r).ends_with("next:\n")) << render_text(r);
  // kiln's section decides both lines when it has them.
  r = sample(false);
  r["mamba2_fast_path"] = {{"active", false}, {"reasons", {"doctor.py's"}}};
  r["kiln"] = {{"fast_path", {{"active", false}, {"reasons", {"a"}}}},
               {"mamba2_fast_path", {{"active", true}, {"reasons", nlohmann::json::array()}}}};
  EXPECT_EQ(render_text(r),
            "python  /usr/bin/python3 3.12.3 (cp312), glibc 2.39\n"
            "gpu 0   NVIDIA H200, sm_90 (compute capability 9.0)\n"
            "fast path: missing (a)\n"
            "Mamba-2 fast path: active\n"
            "next:\n"
            "  kiln target init --name t\n"
            "  kiln serve --host 0.0.0.0\n");
  // ... and which next commands: its static checks found mamba-ssm built for other GPUs.
  r["next"]["argv_for"] = {{"fast_path", one("build", "gdn")},
                           {"fast_path+mamba2_fast_path", one("build", "both")}};
  r["kiln"]["mamba2_fast_path"] = {{"active", false}, {"reasons", {"mamba-ssm gpu-target: no"}}};
  EXPECT_CONTAINS(render_text(r),
                  "Mamba-2 fast path: missing (mamba-ssm gpu-target: no)\nnext:\n  build both\n");
}

// The next commands are printed from their words, each quoted: a torch version or a --server
// value in them runs nothing when the line is pasted; a word a terminal would not show as itself,
// or a command that is no list of words, is left out and counted.
TEST(Doctor, PrintsTheNextCommandsFromTheirWordsQuoted) {
  nlohmann::json r = sample(false);
  r["next"]["argv_for"]["fast_path"] = nlohmann::json::parse(R"j([
      ["pip", "install", "--index-url", "http://h/;touch${IFS}/tmp/x;echo/simple/", "causal-conv1d"],
      ["kiln", "target", "init", "--torch", "2.11.0$(id)", "--archs", "<the GPUs' archs>"],
      ["kiln", "a\u001b[2Jb"],
      "pip install x; rm -rf ~",
      ["kiln", 3],
      []])j");
  EXPECT_CONTAINS(
      render_text(r),
      "next:\n"
      "  pip install --index-url 'http://h/;touch${IFS}/tmp/x;echo/simple/' causal-conv1d\n"
      "  kiln target init --torch '2.11.0$(id)' --archs '<the GPUs'\\'' archs>'\n"
      "  (4 commands of the report left out: not a list of words, or a word with a "
      "control character)\n");
}

// doctor.py's line of why (which target of the server, or why none) comes first, as a comment of
// one line a terminal shows as itself; a note of another set of paths, or none, is not shown.
TEST(Doctor, PrintsTheNoteOfTheNextCommandsAsOneCommentLine) {
  nlohmann::json r = sample(false);
  r["next"]["notes_for"] = {{"fast_path", "target default of http://h/ fits\nrm -rf ~\x1b[2J"},
                            {"mamba2_fast_path", "not this one"}};
  EXPECT_CONTAINS(render_text(r),
                  "next:\n  # target default of http://h/ fits\\x0arm -rf ~\\x1b[2J\n"
                  "  kiln target init --name t\n");
  r["next"]["notes_for"] = {{"fast_path", 3}};
  EXPECT_CONTAINS(render_text(r), "next:\n  kiln target init --name t\n");
}

TEST(Doctor, StaticChecksKeepDoctorPyReasonsAndAddTheirOwn) {
  TempDir dir = TempDir::create(fs::temp_directory_path(), "kiln-doctor-").value();
  fs::path site = dir.path() / "site";
  fs::create_directories(site / "causal_conv1d-1.7.0.dist-info");
  fs::create_directories(site / "causal_conv1d");
  // An extension holding SASS for sm_90 and sm_120 (tests/data/fatbin/multi.fatbin).
  std::ofstream(dir.path() / "dev.c") << "void* PyInit_dev(void) { return 0; }\n";
  run_capture({"gcc", "-shared", "-fPIC", "-o", (dir.path() / "dev.so").string(),
               (dir.path() / "dev.c").string()})
      .value();
  run_capture({"objcopy", "--add-section",
               cat(".nv_fatbin=", kiln::test::source_dir(), "/tests/data/fatbin/multi.fatbin"),
               (dir.path() / "dev.so").string(), (site / "causal_conv1d_cuda.so").string()})
      .value();
  std::ofstream(site / "causal_conv1d-1.7.0.dist-info/RECORD")
      << "causal_conv1d_cuda.so,,\ncausal_conv1d-1.7.0.dist-info/RECORD,,\n";
  nlohmann::json report = sample(true);
  report["gpus"] = nlohmann::json::parse(R"([{"cc": "9.0"}])");
  report["driver"] = {{"cuda", "13.0"}};
  report["packages"] = {{"torch", {{"installed", false}}},
                        {"causal-conv1d",
                         {{"installed", true},
                          {"site", site.string()},
                          {"dist_info", (site / "causal_conv1d-1.7.0.dist-info").string()}}}};
  report["kiln_wheels"] = nlohmann::json::array(
      {{{"name", "gone"}, {"site", site.string()}, {"dist_info", "/x/gone-1.0.dist-info"}}});
  nlohmann::json k = static_checks(report, "python3");
  ASSERT_EQ(k["installed"].size(), 2u);
  EXPECT_EQ(k["installed"][0]["name"], "causal-conv1d");
  EXPECT_EQ(k["installed"][0]["ok"], true);
  EXPECT_EQ(k["fast_path"], nlohmann::json::parse(R"({"active": true, "reasons": []})"));
  EXPECT_EQ(k["ok"], true);  // a kiln wheel that cannot be checked does not decide the fast path
  EXPECT_CONTAINS(k["installed"][1]["error"].get<std::string>(), "no such dist-info directory");
  EXPECT_EQ(k["version"], KILN_VERSION_FOR_TESTS);
  // On an sm_100 GPU causal-conv1d has nothing to run: the fast path is missing.
  report["gpus"] = nlohmann::json::parse(R"([{"cc": "9.0"}, {"cc": "10.0"}])");
  k = static_checks(report, "python3");
  EXPECT_EQ(k["ok"], false);
  ASSERT_EQ(k["fast_path"]["reasons"].size(), 1u);
  EXPECT_CONTAINS(k["fast_path"]["reasons"][0].get<std::string>(),
                  "causal-conv1d gpu-target: causal_conv1d_cuda.so will not run on sm_100");
  // The Mamba-2 fast path takes causal-conv1d's verdicts too, after doctor.py's reasons; the
  // kernels transformers takes stay as doctor.py saw them.
  report["mamba2_fast_path"] = nlohmann::json::parse(
      R"({"active": false, "reasons": ["mamba_ssm not installed: pip install x"],
          "kernels": {"causal_conv1d_fn": "package", "selective_state_update": "torch"}})");
  k = static_checks(report, "python3");
  ASSERT_EQ(k["mamba2_fast_path"]["reasons"].size(), 2u);
  EXPECT_EQ(k["mamba2_fast_path"]["reasons"][0], "mamba_ssm not installed: pip install x");
  EXPECT_EQ(k["mamba2_fast_path"]["reasons"][1], k["fast_path"]["reasons"][0]);
  EXPECT_EQ(k["mamba2_fast_path"]["kernels"], report["mamba2_fast_path"]["kernels"]);
  EXPECT_EQ(k["mamba2_fast_path"]["active"], false);
  // doctor.py's reasons come first and stay.
  report = sample(false);
  k = static_checks(report, "python3");
  EXPECT_EQ(k["fast_path"]["reasons"],
            nlohmann::json::array({"causal_conv1d not installed: uv pip install x"}));
  EXPECT_TRUE(k["installed"].empty());
}

TEST(Doctor, RunsDoctorPyWithTheInterpreter) {
  if (find_program("python3").empty()) GTEST_SKIP() << "no python3";
  Options o;
  o.libcuda = "/nonexistent/libcuda.so.1";
  o.server = "http://builder:8000";
  nlohmann::json report = run_script(o).value();
  EXPECT_EQ(report["doctor_version"], 1);
  EXPECT_EQ(report["driver"]["available"], false);
  EXPECT_CONTAINS(report["driver"]["error"].get<std::string>(),
                  "cannot load /nonexistent/libcuda.so.1");
  EXPECT_CONTAINS(report["next"]["commands"].back().get<std::string>(),
                  "uv pip install --index-url 'http://builder:8000/");  // quoted: <XYZ> in it
  // The words of each command beside its line (kiln prints them quoted by itself).
  const nlohmann::json& argv = report["next"]["argv_for"]["fast_path"];
  ASSERT_EQ(argv.size(), 5u);
  EXPECT_EQ(argv[3][0], "pip");
  EXPECT_EQ(
      argv[3][3],
      report["next"]["target"].get<std::string>().insert(0, "http://builder:8000/") + "/simple/");
  // The build and install commands for each set of missing paths name each package once.
  const nlohmann::json& both = report["next"]["commands_for"]["fast_path+mamba2_fast_path"];
  ASSERT_EQ(both.size(), 5u);
  EXPECT_TRUE(
      both[1].get<std::string>().ends_with(" causal-conv1d flash-linear-attention mamba-ssm"));
  EXPECT_TRUE(report["next"]["commands_for"]["mamba2_fast_path"][4].get<std::string>().ends_with(
      "/simple/' causal-conv1d mamba-ssm"));
  EXPECT_EQ(report["next"]["commands_for"]["fast_path"], report["next"]["commands"]);
  o.python = "/nonexistent/python3";
  auto bad = run_script(o);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().kind, ErrorKind::BadInput);
  o.python = "true";  // exits 0 and prints nothing
  auto empty = run_script(o);
  ASSERT_FALSE(empty);
  EXPECT_CONTAINS(empty.error().message, "did not print its report");
  o.python = "false";  // exit 1, no report either
  EXPECT_FALSE(run_script(o));
}

}  // namespace
}  // namespace kiln::doctor
