#include "compile/setuptools.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "compile/backend.h"
#include "compile/compat.h"
#include "compile/pid_namespace.h"
#include "compile/sandbox.h"
#include "compile/source_times.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/lock.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"
#include "wheel/reader.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// What kiln reads back from a build root the package's code wrote: the wheel pip made, ninja's
// logs.
constexpr std::uint64_t kMaxBuiltWheelBytes = std::uint64_t(4) << 30;
constexpr std::uint64_t kMaxNinjaLogBytes = std::uint64_t(64) << 20;

// pip and Python settings that would let a user's configuration into the build.
const std::vector<std::string> kUnsetForPython = {
    "PYTHONPATH",          "PYTHONHOME",     "PYTHONSTARTUP",  "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_REQUIREMENT",
    "PIP_TARGET",          "PIP_PREFIX",     "PIP_USER",       "VIRTUAL_ENV"};
// Compiler settings the build sets itself or that would change the objects behind kiln's back.
const std::vector<std::string> kUnsetForBuild = {"CXXFLAGS",
                                                 "CPPFLAGS",
                                                 "LDFLAGS",
                                                 "NVCC_PREPEND_FLAGS",
                                                 "NVCC_APPEND_FLAGS",
                                                 "NVCC_CCBIN",
                                                 "TORCH_EXTENSIONS_DIR",
                                                 "TORCH_NVCC_FLAGS",
                                                 "CUDA_PATH",
                                                 "CUDACXX",
                                                 "CPATH",
                                                 "C_INCLUDE_PATH",
                                                 "CPLUS_INCLUDE_PATH",
                                                 "LIBRARY_PATH"};

std::vector<std::pair<std::string, std::string>> python_env() {
  return {{"PIP_CONFIG_FILE", "/dev/null"},       {"PIP_NO_INDEX", "1"}, {"PIP_NO_CACHE_DIR", "1"},
          {"PIP_DISABLE_PIP_VERSION_CHECK", "1"}, {"PIP_NO_INPUT", "1"}, {"PYTHONNOUSERSITE", "1"},
          {"PYTHONDONTWRITEBYTECODE", "1"},       {"LC_ALL", "C"}};
}

std::vector<std::string> unset_list(bool build) {
  std::vector<std::string> out = kUnsetForPython;
  if (build) out.insert(out.end(), kUnsetForBuild.begin(), kUnsetForBuild.end());
  return out;
}

// The build runs in a network namespace of its own: nothing it runs can download anything.
const std::vector<std::string>& network_prefix() {
  static const std::vector<std::string> prefix = [] {
    auto p = unshare_prefix({"--net"});
    if (p.empty()) p = unshare_prefix({"--user", "--map-root-user", "--net"});
    if (p.empty())
      log::warn(
          "cannot run the setuptools build without a network (unshare --net): it runs with pip's "
          "index switched off, but could reach the network");
    return p;
  }();
  return prefix;
}

bool is_elf(std::string_view data) {
  return data.size() >= 4 && data.substr(0, 4) ==
                                 "\x7f"
                                 "ELF";
}

// The .ninja_log files a setuptools build leaves under src/build/.
std::vector<fs::path> find_ninja_logs(const fs::path& build_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(build_dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->path().filename() == ".ninja_log" && it->is_regular_file()) out.push_back(it->path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// nvcc as the package's build calls it (PYTORCH_NVCC): intermediates named after the object,
// beside it, instead of /tmp/tmpxft_<pid>_* files whose names end up in the object, and a PID
// namespace of its own, where the ids cudafe++ names anonymous namespaces after are the same on
// every run (see the native backend). --threads N (-t N) and --split-compile N are dropped: they
// only compile archs (or pieces of one) in parallel, and the fat binary then holds the archs in
// the order they finished, so one key made different bytes (the build is already one ninja job
// per source, slots in parallel).
//
// In the build's sandbox, where kiln's own PID namespace prefix cannot run (no capability), nvcc
// gets a user namespace and a PID namespace of its own (`unshare --user --map-root-user --pid`,
// which needs none) where the kernel allows it; where not, it runs as it is and leaves `marker`,
// and the build's caveats say so.
std::string nvcc_wrapper(const fs::path& nvcc, bool sandboxed, const fs::path& marker) {
  std::vector<std::string> prefix =
      sandboxed
          ? std::vector<std::string>{"unshare",      "--user", "--map-root-user", "--pid", "--fork",
                                     "--kill-child", "--"}
          : nvcc_pid_namespace().prefix;
  std::vector<std::string> exec = prefix;
  exec.push_back(nvcc.string());
  std::string fallback;
  if (sandboxed) {
    std::vector<std::string> probe = prefix;
    probe.push_back("true");
    fallback =
        cat("if ! ", format_argv(probe), " 2>/dev/null; then\n  : > ", shell_quote(marker.string()),
            "\n  exec ", shell_quote(nvcc.string()), " \"$@\"\nfi\n");
  }
  return cat(
      "#!/bin/sh\n",
      "# Written by kiln for the setuptools backend: nvcc with named intermediates beside the "
      "object\n",
      "# and, where permitted, in a PID namespace of its own (objects the same on every build).\n",
      "out=\nprev=\nskip=\nfirst=1\n", "for arg in \"$@\"; do\n",
      "  if [ $first = 1 ]; then set --; first=0; fi\n",
      "  if [ -n \"$skip\" ]; then skip=; continue; fi\n", "  case $arg in\n",
      "    --threads|-t|--split-compile|-split-compile) skip=1; continue ;;\n",
      "    --threads=*|-t[0-9]*|--split-compile=*|-split-compile=*) continue ;;\n", "  esac\n",
      "  if [ \"$prev\" = \"-o\" ]; then out=$arg; fi\n", "  prev=$arg\n",
      "  set -- \"$@\" \"$arg\"\n", "done\n",
      "if [ -n \"$out\" ]; then\n  mkdir -p \"$out.keep\" && set -- \"$@\" --keep --keep-dir "
      "\"$out.keep\"\nfi\n",
      fallback, "exec ", format_argv(exec), " \"$@\"\n");
}

Expected<std::string> torch_cuda_arch_list(const manifest::ArchList& archs) {
  if (archs.empty()) return Error::bad_input("the setuptools backend needs at least one arch");
  for (const auto& a : archs.archs()) {
    if (!a.sass)
      return Error::bad_input(
          cat("the setuptools backend cannot build PTX alone (", a.compute_name(),
              "): TORCH_CUDA_ARCH_LIST has no way to say it; use ", a.major, ".", a.minor,
              a.suffix ? std::string(1, a.suffix) : std::string(), "+PTX or the native backend"));
    if (a.suffix == 'f')
      return Error::bad_input(
          cat("the setuptools backend cannot build ", a.sm_name(),
              ": torch's TORCH_CUDA_ARCH_LIST has no 'f' variants; use the native backend"));
  }
  return archs.torch_arch_list();
}

std::vector<std::pair<std::string, double>> parse_ninja_log(const std::string& text) {
  std::vector<std::pair<std::string, double>> out;
  std::map<std::string, std::size_t> index;
  for (const auto& line : split(text, "\n")) {
    if (line.empty() || line[0] == '#') continue;
    auto fields = split(line, "\t");
    if (fields.size() < 4) continue;
    char* end = nullptr;
    double start = std::strtod(fields[0].c_str(), &end);
    if (end == fields[0].c_str()) continue;
    double stop = std::strtod(fields[1].c_str(), &end);
    if (end == fields[1].c_str()) continue;
    std::pair<std::string, double> entry{fields[3], (stop - start) / 1000.0};
    if (auto it = index.find(fields[3]); it != index.end()) {
      out[it->second] = entry;
    } else {
      index.emplace(fields[3], out.size());
      out.push_back(entry);
    }
  }
  return out;
}

namespace {

// Makes the environment at `env` (not there yet), its steps' logs in `scratch`.
Expected<void> make_build_env(const BuildEnvSpec& spec, const fs::path& env,
                              const fs::path& scratch) {
  const std::string python = (env / "bin" / "python").string();
  const auto started = std::chrono::steady_clock::now();
  std::vector<Job> steps;
  auto step = [&](std::string label, std::vector<std::string> argv) {
    Job job;
    job.label = std::move(label);
    job.argv = std::move(argv);
    job.env = python_env();
    job.env_unset = unset_list(false);
    job.cwd = scratch;
    job.log = scratch / "logs" / cat(steps.size(), ".log");
    if (!steps.empty()) job.deps = {steps.size() - 1};
    steps.push_back(std::move(job));
  };
  step("venv", {spec.interpreter, "-m", "venv", "--without-pip", env.string()});
  std::vector<std::string> install = {python,
                                      (spec.pip / "pip").string(),
                                      "install",
                                      "--isolated",
                                      "--no-index",
                                      "--no-deps",
                                      "--no-compile",
                                      "--no-cache-dir",
                                      "--disable-pip-version-check",
                                      "--quiet"};
  for (const auto& w : spec.wheels) install.push_back(w.string());
  step("pip install (the pinned tools and torch)", install);
  if (!spec.torch_site.empty())
    step("torch of the environment",
         {python, "-c",
          "import sys, sysconfig; open(sysconfig.get_paths()['purelib'] + '/kiln-torch.pth', "
          "'w').write(sys.argv[1] + '\\n')",
          spec.torch_site.string()});
  step("import torch",
       {python, "-c", "import setuptools, wheel, packaging, torch.utils.cpp_extension"});
  RunnerOptions options;
  options.slots = 1;
  auto ran = run_jobs(steps, options);
  if (!ran)
    return Error::failed(cat("cannot make the setuptools build environment: ", ran.error().message),
                         ran.error().detail);
  KILN_CHECK(write_file_atomic(env / "kiln-env.json", spec.identity));
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  log::info(
      cat("made the setuptools build environment in ", static_cast<int>(seconds + 0.5), " s"));
  return {};
}

}  // namespace

Expected<fs::path> ensure_build_env(const BuildEnvSpec& spec, const cache::Store& store) {
  return store.ensure(cache::setuptools_env(spec.identity_sha256),
                      [&](const fs::path& env, const fs::path& scratch) {
                        return make_build_env(spec, env, scratch);
                      });
}

namespace {

// The pip build's sandbox: besides the build's own (compile/sandbox.h), the environment, the
// interpreter it was made from (its prefix: the standard library), and a torch of the target's
// environment with the site-packages it imports from.
Expected<BuildSandbox> setuptools_sandbox(const SetuptoolsContext& ctx) {
  std::error_code ec;
  fs::path interpreter = fs::canonical(ctx.python.executable, ec);
  std::vector<fs::path> extra = {ctx.env, fs::canonical(ctx.env, ec)};
  if (!interpreter.empty()) extra.push_back(interpreter.parent_path().parent_path());
  if (!ctx.torch_root.empty()) extra.push_back(ctx.torch_root.parent_path());
  return build_sandbox(ctx, ctx.torch_root, extra);
}

// What each compile the package's ninja ran took (its .ninja_log files, kept with the job logs).
void add_ninja_timings(const fs::path& root, JobStats& stats) {
  for (const auto& log_path : find_ninja_logs(root / "src" / "build")) {
    auto text = read_file_beneath(root, log_path, kMaxNinjaLogBytes);
    if (!text) continue;
    auto kept = write_file_atomic(
        root / "logs" / cat("ninja_log.", log_path.parent_path().filename().string()), *text);
    (void)kept;
    const std::string dir = log_path.parent_path().string() + "/";
    for (const auto& [output, seconds] : parse_ninja_log(*text)) {
      std::string name = output.rfind(dir, 0) == 0 ? output.substr(dir.size()) : output;
      stats.timings.push_back({cat("ninja ", name), seconds, 0, 0});
    }
  }
}

// The one wheel pip wrote into `dist`: its package files and extension modules into `result`.
Expected<void> take_built_wheel(const SetuptoolsContext& ctx, const fs::path& dist,
                                const fs::path& log, SetuptoolsResult& result) {
  std::error_code ec;
  std::vector<fs::path> wheels;
  for (const auto& entry : fs::directory_iterator(dist, ec))
    if (entry.path().extension() == ".whl") wheels.push_back(entry.path());
  if (wheels.size() != 1)
    return Error::failed(cat("pip wheel of ", ctx.manifest->name, " wrote ", wheels.size(),
                             " wheels into ", dist.string(),
                             ", expected one; log: ", log.string()));
  result.built_wheel = wheels[0].filename().string();
  // Read as the package's code left it, following no link (it may have made dist/ or the wheel
  // one, to a file kiln can read and it cannot).
  KILN_TRY(std::string bytes, read_file_beneath(ctx.root, wheels[0], kMaxBuiltWheelBytes));
  KILN_TRY(auto files, wheel::read_wheel_files(std::move(bytes), result.built_wheel));
  for (auto& e : files) {
    std::string top = e.path.substr(0, e.path.find('/'));
    if (top.size() < e.path.size() && top.ends_with(".dist-info")) continue;  // kiln writes its own
    if (top.size() < e.path.size() && top.ends_with(".data"))
      return Error::failed(
          cat(result.built_wheel, " installs files outside the package (", e.path,
              "): the setuptools backend ships packages and extension modules only"));
    if (e.symlink) return Error::failed(cat(result.built_wheel, ": ", e.path, " is a symlink"));
    bool elf = is_elf(e.data);
    if (elf) result.modules.push_back(e.path);
    if (e.path.ends_with(".pyc") || e.path.find("__pycache__/") != std::string::npos) continue;
    result.files.push_back({e.path, std::move(e.data), elf || e.executable});
  }
  if (result.modules.empty())
    return Error::failed(cat("the setuptools build of ", ctx.manifest->name,
                             " wrote no extension module (", result.built_wheel,
                             "); a pure-Python package wants backend = \"pure\""));
  return {};
}

}  // namespace

Expected<SetuptoolsPlan> plan_setuptools(const SetuptoolsContext& ctx) {
  KILN_TRY(std::string arch_list, torch_cuda_arch_list(ctx.archs));
  const int slots = ctx.jobs > 0 ? ctx.jobs : default_slots();
  KILN_TRY(BuildSandbox sandbox, setuptools_sandbox(ctx));
  // Written by the nvcc wrapper, inside the sandbox (where logs/ is read-only).
  const fs::path outside_marker = ctx.root / "marks" / "nvcc-outside-pid-namespace";
  KILN_CHECK(ensure_directory(outside_marker.parent_path()));
  // The environment through a fixed path: the torch headers' paths are recorded in the objects.
  std::error_code ec;
  fs::remove(ctx.root / "env", ec);
  fs::path env = fs::canonical(ctx.env, ec);  // a real path: the sandbox holds real paths only
  if (ec) env = ctx.env;
  fs::create_directory_symlink(env, ctx.root / "env", ec);
  if (ec)
    return Error::failed(cat("cannot link ", (ctx.root / "env").string(), ": ", ec.message()));
  const fs::path nvcc = ctx.root / "bin" / "nvcc";
  KILN_CHECK(ensure_directory(nvcc.parent_path()));
  fs::remove(outside_marker, ec);
  KILN_CHECK(write_file_atomic(
      nvcc, nvcc_wrapper(ctx.cuda.nvcc, sandbox.spec.has_value(), outside_marker), 0755));
  const fs::path dist = ctx.root / "dist";
  fs::remove_all(dist, ec);
  KILN_CHECK(ensure_directory(dist));

  const char* path = std::getenv("PATH");
  Job job;
  job.label = cat("pip wheel ", ctx.manifest->name);
  // The sandbox has no network of its own; unsandboxed, a network namespace where one may be made.
  if (!sandbox.spec) job.argv = network_prefix();
  const std::vector<std::string> pip = {(ctx.root / "env" / "bin" / "python").string(),
                                        "-m",
                                        "pip",
                                        "wheel",
                                        "--isolated",
                                        "--no-build-isolation",
                                        "--no-deps",
                                        "--no-index",
                                        "--no-cache-dir",
                                        "-v",
                                        "-w",
                                        dist.string(),
                                        (ctx.root / "src").string()};
  job.argv.insert(job.argv.end(), pip.begin(), pip.end());
  job.env = python_env();
  for (const auto& kv : std::vector<std::pair<std::string, std::string>>{
           {"PATH", cat((ctx.root / "env" / "bin").string(), ":", (ctx.cuda.home / "bin").string(),
                        path ? cat(":", path) : "")},
           {"CUDA_HOME", ctx.cuda.home.string()},
           {"TORCH_CUDA_ARCH_LIST", arch_list},
           {"MAX_JOBS", std::to_string(slots)},
           {"PYTORCH_NVCC", nvcc.string()},
           // The target's compiler for everything (nvcc's host compiler too: cpp_extension adds
           // -ccbin $CC) with the host flags of the native backend (Python's usual ones without
           // -g: setuptools puts CFLAGS in place of the interpreter's), linked without the
           // interpreter's own flags (a Python built with an rpath would put it into the module).
           {"CC", ctx.cxx.path},
           {"CXX", ctx.cxx.path},
           {"CFLAGS", "-fno-strict-overflow -Wsign-compare -DNDEBUG -O2 -Wall"},
           {"LDSHARED", cat(ctx.cxx.path, " -shared")},
           {"LDCXXSHARED", cat(ctx.cxx.path, " -shared")},
           {"SOURCE_DATE_EPOCH", std::to_string(kZipEpoch)},
           {"PYTHONHASHSEED", "0"}})
    job.env.push_back(kv);
  // The floor's compat headers through CPATH: g++ reads it for every compile, nvcc's host passes
  // and preprocessing included, before the system's include directories.
  KILN_TRY(fs::path compat, write_compat_headers(ctx.root, ctx.manylinux));
  KILN_CHECK(fix_mtimes(ctx.root / "src"));
  if (!compat.empty()) job.env.push_back({"CPATH", compat.string()});
  job.env_unset = unset_list(true);
  job.cwd = ctx.root / "src";
  job.log = ctx.root / "logs" / "setuptools.log";
  // One job in the pool that holds as many slots as the package's ninja runs compiles (MAX_JOBS).
  job.weight = slots;
  job.memory_gib = 1;
  job.rank = 2;         // with the device parts: the longest jobs of a plan
  job.estimate = 1e12;  // its work is the whole package's
  if (sandbox.spec) job.sandbox = std::make_shared<const SandboxSpec>(std::move(*sandbox.spec));
  // A sandboxed job gets the root (nobody's, where kiln is root) while it runs, back at finish.
  auto loan = std::make_shared<std::optional<TreeLoan>>();
  if (job.sandbox)
    job.before = [loan, root = ctx.root]() -> Expected<void> {
      KILN_TRY(TreeLoan lent, TreeLoan::lend(root));
      loan->emplace(std::move(lent));
      return {};
    };
  SetuptoolsPlan out;
  out.finish = [loan, ctx, dist, log = job.log, caveat = sandbox.caveat,
                sandboxed = job.sandbox != nullptr,
                outside_marker]() -> Expected<SetuptoolsResult> {
    if (*loan) KILN_CHECK((*loan)->give_back());
    loan->reset();
    SetuptoolsResult result;
    std::error_code ec;
    if (!caveat.empty()) result.caveats.push_back(caveat);
    if (sandboxed ? fs::exists(outside_marker, ec) : !nvcc_pid_namespace().caveat.empty())
      result.caveats.push_back(
          "nvcc ran outside a PID namespace (unshare --pid is not permitted here): objects whose "
          "code has anonymous namespaces differ between builds");
    add_ninja_timings(ctx.root, result.stats);
    KILN_CHECK(take_built_wheel(ctx, dist, log, result));
    return result;
  };
  out.job = std::move(job);
  return out;
}

namespace {

// The package's own build, in the pinned environment the pipeline prepared.
// The environment for a target: <cache>/envs/setuptools-<identity>, made (its pinned wheels fetched
// first) when missing. Its identity: the Python, the torch and the pins.
Expected<fs::path> environment(const Preparation& p, const toolchain::Toolchain& tc) {
  const manifest::Target& target = *p.target;
  const bool pinned_torch = target.torch_source == manifest::Target::TorchSource::Pypi;
  KILN_TRY(std::vector<manifest::PinnedWheel> files, p.build_env->wheels_for(target));
  nlohmann::json identity = {
      {"python", {{"executable", tc.python.executable}, {"version", tc.python.version}}},
      {"torch", tc.torch.identity()},
      {"pins", p.build_env->identity(pinned_torch ? target.torch_version : "")}};
  if (!pinned_torch) identity["torch"]["site"] = tc.torch.root.parent_path().string();
  BuildEnvSpec spec;
  spec.identity = identity.dump(2) + "\n";
  spec.identity_sha256 = sha256_hex(identity.dump());
  if (auto made = p.store->find_made(cache::setuptools_env(spec.identity_sha256))) return *made;
  spec.interpreter = tc.python.executable;
  for (const auto& w : files) {
    KILN_TRY(fs::path got, p.fetch(w));
    if (spec.pip.empty()) spec.pip = got;  // tools start with pip
    spec.wheels.push_back(got);
  }
  if (pinned_torch)
    spec.wheels.push_back(tc.torch_wheel);
  else
    spec.torch_site = tc.torch.root.parent_path();
  return ensure_build_env(spec, *p.store);
}

class SetuptoolsBackend final : public Backend {
 public:
  Expected<void> prepare(const Preparation& p, BuildRequest& request) const override {
    KILN_TRY(request.setuptools.env, environment(p, *request.toolchain));
    return {};
  }
  Expected<PlannedBuild> plan(const BuildRequest& request) const override {
    SetuptoolsContext ctx;
    static_cast<CompileBasics&>(ctx) = compile_basics(request);
    ctx.env = request.setuptools.env;
    ctx.torch_root = request.toolchain->torch.root;
    KILN_TRY(SetuptoolsPlan built, plan_setuptools(ctx));
    PlannedBuild planned;
    planned.jobs.push_back(std::move(built.job));
    planned.finish = [finish = std::move(built.finish),
                      archs = request.archs.torch_arch_list()]() -> Expected<BuildOutput> {
      KILN_TRY(SetuptoolsResult result, finish());
      BuildOutput out;
      out.files = std::move(result.files);
      out.modules = std::move(result.modules);
      out.stats = std::move(result.stats);
      out.caveats = std::move(result.caveats);
      out.setuptools = wheel::SetuptoolsBuild{std::move(result.built_wheel), archs};
      return out;
    };
    return planned;
  }
  Expected<void> check_archs(const manifest::ArchList& archs) const override {
    KILN_CHECK(torch_cuda_arch_list(archs));
    return {};
  }
};

}  // namespace

std::unique_ptr<Backend> setuptools_backend() {
  return std::make_unique<SetuptoolsBackend>();
}

}  // namespace kiln::compile
