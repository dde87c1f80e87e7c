#include "compile/native.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "compile/backend.h"
#include "compile/compat.h"
#include "compile/job_graph.h"
#include "compile/nvcc_split.h"
#include "compile/object_cache.h"
#include "compile/parsed_bytes.h"
#include "compile/pid_namespace.h"
#include "compile/pure.h"
#include "compile/sandbox.h"
#include "compile/source_times.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// A module kiln reads back from the build root (as its link left it, following no link).
constexpr std::uint64_t kMaxModuleBytes = std::uint64_t(4) << 30;

// The build root's fixed views the flags refer to (torch/, python/, cuda/), the floor's compat
// headers, its output folders, and the sources' mtimes. Each view points at the real path (the
// sandbox holds real paths only; compilers record the view's name, not where it points).
Expected<void> prepare_root(const NativeContext& ctx) {
  for (const auto& [link, target] :
       {std::pair<std::string, fs::path>{"torch", ctx.torch.root},
        std::pair<std::string, fs::path>{"python", ctx.python.include_dir},
        std::pair<std::string, fs::path>{"cuda", ctx.cuda.home}}) {
    std::error_code ec;
    fs::path real = fs::canonical(target, ec);
    if (ec) real = target;
    fs::remove(ctx.root / link, ec);
    fs::create_directory_symlink(real, ctx.root / link, ec);
    if (ec)
      return Error::failed(cat("cannot link ", (ctx.root / link).string(), ": ", ec.message()));
  }
  KILN_CHECK(write_compat_headers(ctx.root, ctx.manylinux));
  KILN_CHECK(ensure_directory(ctx.root / "obj"));
  KILN_CHECK(ensure_directory(ctx.root / "out"));
  return fix_mtimes(ctx.root / "src");
}

// Every arch of this nvcc, for __CUDA_ARCH_LIST__ (see nvcc_split.h); "" when it cannot say.
std::string canonical_arch_list(const fs::path& nvcc) {
  ProcessSpec spec;
  spec.argv = {nvcc.string(), "--list-gpu-arch"};
  auto r = run_process(spec);
  if (!r || !r->ok()) return "";
  return nvcc::arch_list_value(r->output);
}

// Runs nvcc dry runs, several at a time; each result is its output or an error.
std::vector<Expected<std::string>> run_dry_runs(
    const std::vector<std::vector<std::string>>& commands, const fs::path& cwd) {
  std::vector<Expected<std::string>> results(commands.size(), Error::failed("not run"));
  const std::size_t batch = 32;
  for (std::size_t first = 0; first < commands.size(); first += batch) {
    std::vector<std::pair<std::size_t, Child>> children;
    for (std::size_t i = first; i < std::min(commands.size(), first + batch); ++i) {
      ProcessSpec spec;
      spec.argv = commands[i];
      spec.cwd = cwd;
      auto child = spawn(spec);
      if (!child)
        results[i] = child.error();
      else
        children.emplace_back(i, std::move(*child));
    }
    for (auto& [i, child] : children) {
      auto r = child.wait();
      if (!r)
        results[i] = r.error();
      else if (!r->ok())
        results[i] = Error::failed(cat("nvcc --dryrun failed: ", tail_lines(r->output, 5)));
      else
        results[i] = std::move(r->output);
    }
  }
  return results;
}

// Whether nvcc compiles any of `units` (which then runs in nvcc's PID namespace).
bool compiles_cuda(const std::vector<Unit>& units) {
  return std::any_of(units.begin(), units.end(),
                     [](const Unit& u) { return u.source.ends_with(".cu"); });
}

// What the planner needs: the units (with what each parses of the tree), nvcc's dry runs and its
// arch list, the PID namespace prefix (none in a sandbox: its commands are each their PID 1).
Expected<PlanInput> plan_input(const NativeContext& ctx, int slots, bool sandboxed) {
  PlanInput input;
  input.ctx = &ctx;
  input.slots = slots;
  input.units = translation_units(ctx);
  for (auto& u : input.units)
    u.source_bytes = parsed_bytes(ctx.root / "src", u.source, u.ext->include_dirs);
  if (compiles_cuda(input.units) && !sandboxed) input.pid_prefix = nvcc_pid_namespace().prefix;
  input.arch_list = canonical_arch_list(ctx.cuda.nvcc);
  input.dry_runs = dry_run_commands(ctx, input.units, input.arch_list);
  for (const auto& dir : input.dry_runs.directories) KILN_CHECK(ensure_directory(dir));
  input.dry_outputs = run_dry_runs(input.dry_runs.commands, ctx.root / "src");
  return input;
}

}  // namespace

Expected<NativeBuild> plan_native(const NativeContext& given) {
  const int slots = given.jobs > 0 ? given.jobs : default_slots();
  // Every compile and the link in the build's sandbox, each its own PID 1 (nvcc keeps its id);
  // objects made there are never taken for objects made outside one, nor the other way round.
  KILN_TRY(BuildSandbox sandbox, build_sandbox(given, given.torch.root, {}));
  NativeContext ctx = given;
  if (sandbox.spec) ctx.object_salt += "\nsandboxed";
  KILN_CHECK(prepare_root(ctx));
  KILN_TRY(PlanInput input, plan_input(ctx, slots, sandbox.spec.has_value()));
  const bool cuda = compiles_cuda(input.units);
  // What the jobs use while they run, held until the build is done.
  struct Held {
    std::unique_ptr<ObjectCache> objects;
    std::optional<TreeLoan> loan;
  };
  auto held = std::make_shared<Held>();
  if (ctx.cache)
    held->objects = std::make_unique<StoreObjectCache>(*ctx.cache);
  else
    held->objects = std::make_unique<NoObjectCache>();
  JobGraph graph = plan_jobs(std::move(input), *held->objects);
  for (const auto& dir : graph.directories) KILN_CHECK(ensure_directory(dir));
  NativeBuild out;
  out.stale = graph.stale;
  std::vector<BuiltModule> modules = std::move(graph.modules);
  out.jobs = schedule(std::move(graph));
  std::shared_ptr<const SandboxSpec> spec;
  if (sandbox.spec) spec = std::make_shared<const SandboxSpec>(std::move(*sandbox.spec));
  for (auto& job : out.jobs) {
    job.sandbox = spec;
    if (ctx.root_lock_fd >= 0) job.inherit_fds = {ctx.root_lock_fd};
  }
  // The root is lent to the sandbox (nobody's, where kiln is root) until the jobs are done.
  if (spec) {
    KILN_TRY(TreeLoan lent, TreeLoan::lend(ctx.root));
    held->loan.emplace(std::move(lent));
  }
  std::vector<std::string> caveats;
  if (!sandbox.caveat.empty()) caveats.push_back(sandbox.caveat);
  if (cuda && !spec && !nvcc_pid_namespace().caveat.empty())
    caveats.push_back(nvcc_pid_namespace().caveat);
  out.finish = [held, root = ctx.root, modules = std::move(modules),
                caveats = std::move(caveats)]() -> Expected<NativeResult> {
    if (held->loan) KILN_CHECK(held->loan->give_back());
    held->loan.reset();
    NativeResult result;
    result.modules = modules;
    result.caveats = caveats;
    std::error_code ec;
    fs::remove_all(root / "keep", ec);  // the objects are built: nvcc's intermediates can go
    return result;
  };
  return out;
}

namespace {

NativeContext native_context(const BuildRequest& request) {
  NativeContext ctx;
  static_cast<CompileBasics&>(ctx) = compile_basics(request);
  ctx.torch = request.toolchain->torch;
  ctx.cache = request.native.cache;
  ctx.object_salt = request.native.object_salt;
  ctx.shards = request.native.shards;
  ctx.root_lock_fd = request.root_lock_fd;
  return ctx;
}

// The package's Python files, then its extension modules, planned by plan_native.
class NativeBackend final : public Backend {
 public:
  Expected<void> prepare(const Preparation& p, BuildRequest& request) const override {
    request.native = {request.fresh ? nullptr : p.store, p.object_salt, p.shards};
    return {};
  }
  Expected<PlannedBuild> plan(const BuildRequest& request) const override {
    KILN_TRY(std::vector<wheel::WheelEntry> files,
             collect_packages(request.root / "src", request.manifest->packages));
    KILN_TRY(NativeBuild native, plan_native(native_context(request)));
    PlannedBuild out;
    out.jobs = std::move(native.jobs);
    out.stale = native.stale;
    out.finish = [files = std::move(files), finish = std::move(native.finish),
                  root = request.root]() mutable -> Expected<BuildOutput> {
      KILN_TRY(NativeResult built, finish());
      BuildOutput out;
      out.files = std::move(files);
      out.caveats = std::move(built.caveats);
      for (const auto& mod : built.modules) {
        KILN_TRY(std::string data, read_file_beneath(root, mod.file, kMaxModuleBytes));
        out.files.push_back({mod.wheel_path, std::move(data), true});
        out.modules.push_back(mod.wheel_path);
      }
      return out;
    };
    return out;
  }
};

}  // namespace

std::unique_ptr<Backend> native_backend() {
  return std::make_unique<NativeBackend>();
}

}  // namespace kiln::compile
