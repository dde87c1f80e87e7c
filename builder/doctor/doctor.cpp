#include "doctor/doctor.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/json.h"
#include "core/process.h"
#include "core/strings.h"
#include "doctor/report.h"
#include "toolchain/torch.h"
#include "validate/validate.h"

namespace kiln::doctor {

namespace fs = std::filesystem;

namespace {

// A distribution to check: where its dist-info is, as doctor.py reported it.
struct Installed {
  std::string name;
  fs::path site;
  std::string dist_info;   // the directory's name
  bool fast_path = false;  // causal-conv1d: its verdicts decide the (Gated DeltaNet) fast path
  bool mamba2 = false;     // causal-conv1d, mamba-ssm: theirs decide the Mamba-2 fast path
};

// causal-conv1d and mamba-ssm (when installed) and every kiln-built wheel, each once.
std::vector<Installed> to_check(const nlohmann::json& report) {
  std::vector<Installed> out;
  std::set<std::string> seen;
  auto add = [&](const nlohmann::json& d, const std::string& name, bool fast, bool mamba2) {
    std::string path = str(d, "dist_info"), site = str(d, "site");
    if (path.empty() || site.empty() || !seen.insert(path).second) return;
    out.push_back({name, site, fs::path(path).filename().string(), fast, mamba2});
  };
  const nlohmann::json& packages = member(report, "packages");
  for (const char* name : {"causal-conv1d", "mamba-ssm"}) {
    const nlohmann::json& d = member(packages, name);
    if (flag(d, "installed")) add(d, name, name == std::string("causal-conv1d"), true);
  }
  const nlohmann::json& wheels = member(report, "kiln_wheels");
  if (wheels.is_array())
    for (const auto& w : wheels) add(w, str(w, "name"), false, false);
  return out;
}

// The CUDA runtime and math libraries of the NVIDIA wheels torch depends on (<site>/nvidia/*/lib
// of the distribution's and torch's site directories), then the system's.
std::vector<fs::path> library_dirs(const std::vector<fs::path>& sites) {
  std::vector<fs::path> dirs;
  std::error_code ec;
  for (const auto& site : sites) {
    std::vector<fs::path> found;
    for (auto it = fs::directory_iterator(site / "nvidia", ec);
         !ec && it != fs::directory_iterator(); it.increment(ec))
      if (fs::is_directory(it->path() / "lib", ec)) found.push_back(it->path() / "lib");
    std::sort(found.begin(), found.end());
    for (auto& d : found)
      if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(std::move(d));
  }
  for (auto& d : validate::default_library_dirs()) dirs.push_back(std::move(d));
  return dirs;
}

nlohmann::json report_json(const Installed& item, const validate::Report& r) {
  nlohmann::json checks = nlohmann::json::array();
  for (const auto& c : r.checks) {
    nlohmann::json one = {
        {"id", c.id}, {"verdict", validate::verdict_name(c.verdict)}, {"message", c.message}};
    if (c.data.contains("gpu")) one["gpu"] = c.data["gpu"];
    checks.push_back(std::move(one));
  }
  return {{"name", item.name},
          {"dist_info", (item.site / item.dist_info).string()},
          {"ok", r.ok()},
          {"checks", std::move(checks)}};
}

}  // namespace

std::vector<manifest::Arch> report_gpus(const nlohmann::json& report) {
  std::vector<manifest::Arch> out;
  const nlohmann::json& gpus = member(report, "gpus");
  if (!gpus.is_array()) return out;
  for (const auto& g : gpus) {
    auto parts = split(str(g, "cc"), ".");
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty() || parts[0].size() > 2 ||
        parts[1].size() > 1 || !std::all_of(parts[0].begin(), parts[0].end(), is_ascii_digit) ||
        !is_ascii_digit(parts[1][0]))
      continue;
    manifest::Arch a;
    a.major = std::stoi(parts[0]);
    a.minor = std::stoi(parts[1]);
    a.sass = true;
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

Expected<nlohmann::json> run_script(const Options& options) {
  ProcessSpec spec;
  spec.argv = {options.python, "-c",        std::string(script()),
               "--json",       "--timeout", std::to_string(options.timeout_s)};
  if (!options.libcuda.empty()) spec.argv.insert(spec.argv.end(), {"--libcuda", options.libcuda});
  if (!options.server.empty()) spec.argv.insert(spec.argv.end(), {"--server", options.server});
  spec.output = ProcessSpec::Output::CaptureStdout;
  spec.max_output = kMaxReportBytes;
  auto result = run_process(spec);
  if (!result)
    return Error::bad_input(cat("--python ", options.python, ": ", result.error().message));
  if (result->output_truncated)
    return Error::failed(
        cat("doctor.py under ", options.python, " wrote more than ", kMaxReportBytes, " bytes"));
  if (result->exit_code != 0 && result->exit_code != 1)
    return Error::failed(cat(
        "doctor.py under ", options.python, " failed (",
        result->term_signal ? cat("signal ", result->term_signal) : cat("exit ", result->exit_code),
        "; its errors are above)"));
  auto doc = parse_json(result->output);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("doctor_version"))
    return Error::failed(cat("doctor.py under ", options.python, " did not print its report"));
  return doc;
}

namespace {

// The bin directory of the venv kiln's executable lives in, when that venv has no torch.
std::filesystem::path own_torchless_venv_bin() {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
  if (ec || !fs::is_regular_file(bin.parent_path() / "pyvenv.cfg", ec)) return {};
  for (const auto& lib : {"lib", "lib64"})
    for (fs::directory_iterator it(bin.parent_path() / lib, ec), end; !ec && it != end;
         it.increment(ec))
      if (fs::is_directory(it->path() / "site-packages" / "torch", ec)) return {};
  return fs::canonical(bin, ec);
}

}  // namespace

std::string resolve_python(const std::string& name) {
  namespace fs = std::filesystem;
  if (name.find('/') != std::string::npos) return name;
  fs::path skip = own_torchless_venv_bin();
  if (skip.empty()) return name;
  fs::path found = find_program(name, skip);
  return found.empty() ? name : found.string();
}

nlohmann::json static_checks(const nlohmann::json& report, const std::string& python) {
  validate::Options vo;
  vo.driver_cuda = str(member(report, "driver"), "cuda");
  if (flag(member(member(report, "packages"), "torch"), "installed")) {
    auto torch = toolchain::torch_from_environment(python);
    if (torch)
      vo.torch = std::move(*torch);
    else
      vo.torch_problem = torch.error().message;
    vo.torch_note = "installed";
  } else {
    vo.torch_problem = "torch is not installed";
  }
  const fs::path torch_site = str(member(member(report, "packages"), "torch"), "site");
  const std::vector<manifest::Arch> gpus = report_gpus(report);
  nlohmann::json installed = nlohmann::json::array();
  std::vector<std::string> reasons = path_reasons(member(report, "fast_path"));
  const nlohmann::json& mamba2 = member(report, "mamba2_fast_path");
  std::vector<std::string> mamba2_reasons = path_reasons(mamba2);
  auto fail = [&](const Installed& item, const std::string& why) {
    if (item.fast_path) reasons.push_back(why);
    if (item.mamba2) mamba2_reasons.push_back(why);
  };
  for (const Installed& item : to_check(report)) {
    vo.library_dirs = library_dirs({item.site, torch_site});
    auto r = validate::validate_installed(item.site, item.dist_info, vo, gpus);
    if (!r) {
      installed.push_back({{"name", item.name}, {"error", r.error().message}});
      fail(item, cat(item.name, ": ", r.error().message));
      continue;
    }
    installed.push_back(report_json(item, *r));
    for (const auto& c : r->checks)
      if (c.verdict == validate::Verdict::Fail)
        fail(item, cat(item.name, " ", c.id, ": ", c.message));
  }
  nlohmann::json out = {{"version", KILN_VERSION},
                        {"installed", std::move(installed)},
                        {"fast_path", {{"active", reasons.empty()}, {"reasons", reasons}}},
                        {"ok", reasons.empty()}};
  if (mamba2.is_object())  // doctor.py reports it (an older one served elsewhere may not)
    out["mamba2_fast_path"] = {{"active", mamba2_reasons.empty()},
                               {"reasons", mamba2_reasons},
                               {"kernels", member(mamba2, "kernels")}};
  return out;
}

}  // namespace kiln::doctor
