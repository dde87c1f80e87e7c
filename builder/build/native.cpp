#include "build/native.h"

#include <algorithm>

#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::build {

namespace fs = std::filesystem;

namespace {

// torch.utils.cpp_extension's nvcc defaults.
const std::vector<std::string> kCommonNvccFlags = {
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr"};

// The host flags cpp_extension takes from Python's sysconfig, without -g: kiln ships no host
// debug info (smaller wheels, faster compiles, nothing path-dependent).
const std::vector<std::string> kCommonCxxFlags = {"-fno-strict-overflow", "-Wsign-compare", "-DNDEBUG",
                                                  "-O2", "-Wall", "-fPIC"};

bool has_std_flag(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f.rfind("-std=", 0) == 0 || f.rfind("--std=", 0) == 0 || f == "-std";
  });
}

std::vector<std::string> include_flags(const NativeContext& ctx, const manifest::Extension& ext) {
  std::vector<std::string> flags;
  for (const auto& dir : ext.include_dirs) flags.push_back("-I" + (ctx.root / "src" / dir).string());
  // Through the fixed root, so recorded header paths do not depend on the cache's location.
  flags.push_back("-I" + (ctx.root / "torch" / "include").string());
  flags.push_back("-I" + (ctx.root / "torch" / "include" / "torch" / "csrc" / "api" / "include").string());
  flags.push_back("-I" + (ctx.cuda.home / "include").string());
  flags.push_back("-I" + (ctx.root / "python").string());
  return flags;
}

std::vector<std::string> define_flags(const manifest::Extension& ext) {
  std::vector<std::string> flags;
  for (const auto& m : ext.define_macros) flags.push_back("-D" + m);
  return flags;
}

std::vector<std::string> extension_defines(const NativeContext& ctx, const manifest::Extension& ext) {
  std::vector<std::string> flags = {"-DTORCH_API_INCLUDE_EXTENSION_H",
                                    "-DTORCH_EXTENSION_NAME=" + ext.name.substr(ext.name.rfind('.') + 1)};
  for (const auto& f : ctx.torch.abi_flags()) flags.push_back(f);
  return flags;
}

void append(std::vector<std::string>& to, const std::vector<std::string>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

std::string module_path(const std::string& name, const std::string& suffix) {
  std::string p = name;
  std::replace(p.begin(), p.end(), '.', '/');
  return p + suffix;
}

// cudafe++ names anonymous namespaces (CCCL's, for one) after its process id, and the names end
// up in host and device symbols: nvcc runs in a PID namespace of its own, where the ids are the
// same on every run. Without unshare (or the right to use it) builds still work, but objects of
// such translation units differ between builds.
const std::vector<std::string>& pid_namespace_prefix() {
  static const std::vector<std::string> prefix = [] {
    std::vector<std::string> p = {"unshare", "--pid", "--fork", "--kill-child", "--"};
    ProcessSpec probe;
    probe.argv = p;
    probe.argv.push_back("true");
    probe.output = ProcessSpec::Output::Discard;
    auto r = run_process(probe);
    if (r && r->ok()) return p;
    log::warn("cannot run nvcc in a PID namespace (unshare --pid): objects whose code uses anonymous "
              "namespaces will differ between builds");
    return std::vector<std::string>{};
  }();
  return prefix;
}

}  // namespace

std::vector<std::string> cxx_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                          const std::string& source, const std::string& object) {
  std::vector<std::string> argv = {ctx.cxx.path};
  append(argv, kCommonCxxFlags);
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, ext.cxx_flags);
  append(argv, extension_defines(ctx, ext));
  if (!has_std_flag(ext.cxx_flags)) argv.push_back("-std=c++17");
  return argv;
}

std::vector<std::string> nvcc_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                           const std::string& source, const std::string& object,
                                           int threads, const std::string& keep_dir) {
  std::vector<std::string> argv = pid_namespace_prefix();
  argv.push_back(ctx.cuda.nvcc.string());
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, kCommonNvccFlags);
  argv.push_back("-Xcompiler");
  argv.push_back("-fPIC");
  append(argv, ext.nvcc_flags);
  append(argv, extension_defines(ctx, ext));
  append(argv, ctx.archs.gencode_flags());
  if (!has_std_flag(ext.nvcc_flags)) argv.push_back("-std=c++17");
  argv.push_back("-ccbin");
  argv.push_back(ctx.cxx.path);
  argv.push_back("--threads");
  argv.push_back(std::to_string(threads));
  // Named intermediates instead of tmpxft_<pid>_… ones, whose names end up in the object.
  argv.push_back("--keep");
  argv.push_back("--keep-dir");
  argv.push_back(keep_dir);
  return argv;
}

std::vector<std::string> link_argv(const NativeContext& ctx, const std::vector<std::string>& objects,
                                   const std::string& output) {
  std::vector<std::string> argv = {ctx.cxx.path, "-shared", "-Wl,-O1", "-Wl,--as-needed"};
  append(argv, objects);
  argv.push_back("-L" + (ctx.root / "torch" / "lib").string());
  argv.push_back("-L" + (ctx.cuda.home / "lib64").string());
  for (const auto& lib : toolchain::torch_link_libraries()) argv.push_back("-l" + lib);
  argv.push_back("-o");
  argv.push_back(output);
  return argv;
}

Expected<NativeResult> build_native(const NativeContext& ctx) {
  NativeResult result;
  const int slots = ctx.jobs > 0 ? ctx.jobs : default_slots();
  // The fixed views the flags refer to.
  for (const auto& [link, target] : {std::pair<std::string, fs::path>{"torch", ctx.torch.root},
                                     std::pair<std::string, fs::path>{"python", ctx.python.include_dir}}) {
    std::error_code ec;
    fs::remove(ctx.root / link, ec);
    fs::create_directory_symlink(target, ctx.root / link, ec);
    if (ec) return Error::failed(cat("cannot link ", (ctx.root / link).string(), ": ", ec.message()));
  }
  KILN_CHECK(ensure_directory(ctx.root / "obj"));
  KILN_CHECK(ensure_directory(ctx.root / "out"));
  KILN_CHECK(ensure_directory(ctx.object_cache));

  std::vector<Job> jobs;
  std::vector<std::pair<const manifest::Extension*, std::vector<std::size_t>>> ext_jobs;
  std::vector<std::vector<std::string>> ext_objects;
  for (const auto& ext : ctx.manifest->extensions) {
    std::vector<std::size_t> compile_jobs;
    std::vector<std::string> objects;
    // Longest first: .cu files by size, then host-only files.
    std::vector<std::string> sources = ext.sources;
    std::stable_sort(sources.begin(), sources.end(), [&](const std::string& a, const std::string& b) {
      bool acu = a.ends_with(".cu"), bcu = b.ends_with(".cu");
      if (acu != bcu) return acu;
      std::error_code ec;
      return fs::file_size(ctx.root / "src" / a, ec) > fs::file_size(ctx.root / "src" / b, ec);
    });
    for (const auto& src : sources) {
      std::string stem = src;
      std::replace(stem.begin(), stem.end(), '/', '_');
      std::string object = (ctx.root / "obj" / (ext.name + "." + stem + ".o")).string();
      std::string source = (ctx.root / "src" / src).string();
      bool cuda = src.ends_with(".cu");
      std::size_t gencodes = ctx.archs.gencode_flags().size();
      int threads = cuda ? static_cast<int>(std::min<std::size_t>(std::max<std::size_t>(gencodes, 1), static_cast<std::size_t>(slots))) : 1;
      std::string keep = (ctx.root / "keep" / (ext.name + "." + stem)).string();
      std::vector<std::string> argv = cuda ? nvcc_compile_argv(ctx, ext, source, object, threads, keep)
                                           : cxx_compile_argv(ctx, ext, source, object);
      // The object cache key: the exact command (it names every input path, all fixed) and the
      // identities behind those paths.
      std::string key = sha256_hex(cat(ctx.object_salt, "\n", join(argv, "\x1f")));
      fs::path cached = ctx.object_cache / key.substr(0, 2) / (key + ".o");
      objects.push_back(object);
      std::error_code ec;
      if (fs::is_regular_file(cached, ec)) {
        fs::copy_file(cached, object, fs::copy_options::overwrite_existing, ec);
        if (!ec) {
          result.objects_reused++;
          continue;
        }
      }
      if (cuda) KILN_CHECK(ensure_directory(keep));
      Job job;
      std::string archs_label;
      for (const auto& a : ctx.archs.archs()) archs_label += (archs_label.empty() ? "" : ",") + a.sm_name();
      job.label = cuda ? cat("nvcc ", fs::path(src).filename().string(), " ", archs_label)
                       : cat(fs::path(ctx.cxx.path).filename().string(), " ", fs::path(src).filename().string());
      job.argv = std::move(argv);
      job.env = {{"SOURCE_DATE_EPOCH", "315532800"}, {"LC_ALL", "C"}};
      job.cwd = ctx.root / "src";
      job.log = ctx.root / "logs" / (ext.name + "." + stem + ".log");
      job.weight = threads;
      job.memory_gib = cuda ? 3.5 : 2.0;
      job.on_success = [object, cached]() -> Expected<void> {
        KILN_CHECK(ensure_directory(cached.parent_path()));
        KILN_TRY(std::string data, read_file(object));
        return write_file_atomic(cached, data);
      };
      compile_jobs.push_back(jobs.size());
      jobs.push_back(std::move(job));
    }
    ext_jobs.emplace_back(&ext, compile_jobs);
    // Link in the manifest's source order, not the scheduling order.
    std::vector<std::string> ordered;
    for (const auto& src : ext.sources) {
      std::string stem = src;
      std::replace(stem.begin(), stem.end(), '/', '_');
      ordered.push_back((ctx.root / "obj" / (ext.name + "." + stem + ".o")).string());
    }
    ext_objects.push_back(ordered);
  }
  for (std::size_t i = 0; i < ext_jobs.size(); ++i) {
    const auto& ext = *ext_jobs[i].first;
    std::string rel = module_path(ext.name, ctx.python.ext_suffix);
    fs::path out = ctx.root / "out" / rel;
    KILN_CHECK(ensure_directory(out.parent_path()));
    Job link;
    link.label = cat("link ", fs::path(rel).filename().string());
    link.argv = link_argv(ctx, ext_objects[i], out.string());
    link.env = {{"LC_ALL", "C"}};
    link.cwd = ctx.root / "src";
    link.log = ctx.root / "logs" / (ext.name + ".link.log");
    link.memory_gib = 1;
    link.deps = ext_jobs[i].second;
    jobs.push_back(std::move(link));
    result.modules.push_back(BuiltModule{rel, out});
  }
  if (ctx.root_lock_fd >= 0)
    for (auto& job : jobs) job.inherit_fds = {ctx.root_lock_fd};
  RunnerOptions options;
  options.slots = slots;
  KILN_TRY(JobStats stats, run_jobs(jobs, options));
  result.stats = std::move(stats);
  return result;
}

}  // namespace kiln::build
