// The native backend's job graph for causal-conv1d's recipe, planned from nvcc dry-run text that a
// fake writes (no nvcc runs) and run by a fake runner that makes each job's outputs (no compiler
// runs): shards, per-arch device jobs, front ends, host parts, fat binaries, the link, the order
// the runner starts them in, and what the object cache saves when an arch is added.
#include "compile/job_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <sys/stat.h>

#include "cache/remote.h"
#include "cache/store.h"
#include "compile/compat.h"
#include "compile/flags.h"
#include "compile/object_cache.h"
#include "compile/runner.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/manifest.h"

#include "cache_layout.h"
#include "unit/source_dir.h"

using kiln::testing::layout;

namespace kiln::compile {

namespace {

bool contains(const std::vector<std::string>& argv, const std::string& word) {
  return std::find(argv.begin(), argv.end(), word) != argv.end();
}

// What `nvcc --dryrun` would print for one of kiln's dry-run commands, in nvcc 13's shape: a
// one-arch `--fatbin` run (device part; at -O0 a front end) or a `-c` run (host part and fat
// binary). The argv's -D defines reach the preprocessor commands, as nvcc's would.
std::string fake_dryrun(const std::vector<std::string>& argv) {
  std::string source, out, keep, defines;
  bool device = false, o0 = false;
  std::vector<std::pair<std::string, bool>> archs;  // compute number, with SASS (else PTX only)
  std::vector<std::pair<std::string, std::string>> images;  // kind, sm
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& w = argv[i];
    if ((w == "--fatbin" || w == "-c") && i + 1 < argv.size()) {
      device = w == "--fatbin";
      source = argv[++i];
    } else if (w == "-o" && i + 1 < argv.size()) {
      out = argv[++i];
    } else if (w == "--keep-dir" && i + 1 < argv.size()) {
      keep = argv[++i];
    } else if (w == "-O0") {
      o0 = true;
    } else if (w.starts_with("-D")) {
      defines += " \"" + w + "\"";
    } else if (w.starts_with("-gencode=arch=compute_")) {
      std::string number = w.substr(22, w.find(',') - 22);
      std::string code = w.substr(w.find(",code=") + 6);
      bool sass = code.starts_with("sm_");
      images.emplace_back(sass ? "elf" : "ptx", number);
      if (archs.empty() || archs.back().first != number) archs.emplace_back(number, false);
      archs.back().second = archs.back().second || sass;
    }
  }
  const std::string stem = fs::path(source).stem().string(), k = keep + "/" + stem;
  std::string text =
      "#$ _NVVM_BRANCH_=nvvm\n#$ PATH=/fake-cuda/bin\n#$ CICC_PATH=/fake-cuda/nvvm/bin\n";
  auto line = [&](const std::string& command) { text += "#$ " + command + "\n"; };
  auto image_words = [&] {
    std::string words;
    for (const auto& [kind, sm] : images)
      words += cat(" \"--image3=kind=", kind, ",sm=", sm, ",file=", k,
                   kind == "elf" ? ".sm_" + sm + ".cubin" : std::string(".ptx"), "\"");
    return words;
  };
  auto device_steps = [&](const std::string& number, bool sass, bool gen_module_id) {
    line(cat("/usr/bin/gcc -D__CUDA_ARCH__=", number, "0 -D__CUDA_ARCH_LIST__=", number, "0 -E",
             defines, " \"", source, "\" -o \"", k, ".cpp1.ii\""));
    line(cat("\"$CICC_PATH/cicc\" --c++17 -arch compute_", number, o0 ? " -O0" : "",
             " --include_file_name \"", stem, ".fatbin.c\"",
             gen_module_id ? " --gen_module_id_file" : "", " --module_id_file_name \"", k,
             ".module_id\" --stub_file_name \"", k, ".cudafe1.stub.c\" \"", k, ".cpp1.ii\" -o \"",
             k, ".ptx\""));
    line(cat("/fake-cuda/bin/ptxas -arch=sm_", number, " \"", k, ".ptx\"",
             sass ? cat(" -o \"", k, ".sm_", number, ".cubin\"") : ""));
  };
  if (device) {
    device_steps(archs.front().first, archs.front().second, true);
    line(cat("/fake-cuda/bin/fatbinary --create=\"", out, "\" -64", image_words()));
    return text;
  }
  line(cat("/usr/bin/gcc -D__CUDA_ARCH_LIST__=900 -E", defines, " \"", source, "\" -o \"", k,
           ".cpp4.ii\""));
  line(cat("/fake-cuda/bin/cudafe++ --c++17 --gen_c_file_name \"", k, ".cudafe1.cpp\"",
           " --stub_file_name \"", stem, ".cudafe1.stub.c\" --gen_module_id_file",
           " --module_id_file_name \"", k, ".module_id\" \"", k, ".cpp4.ii\""));
  for (const auto& [number, sass] : archs) device_steps(number, sass, false);
  line(cat("/fake-cuda/bin/fatbinary --create=\"", k, ".fatbin\" -64", image_words(),
           " --embedded-fatbin=\"", k, ".fatbin.c\""));
  line(cat("/usr/bin/gcc -D__CUDA_ARCH__=", archs.back().first, "0 -c -x c++ \"", k,
           ".cudafe1.cpp\" -o \"", out, "\""));
  return text;
}

// What a fake compiler writes: a stub that includes its file's fat binary (as nvcc's does), a
// module id, or bytes that name the file.
std::string made(const fs::path& file) {
  const std::string name = file.filename().string();
  const std::string stub_suffix = ".cudafe1.stub.c";
  if (name.ends_with(stub_suffix))
    return cat("#include \"", name.substr(0, name.size() - stub_suffix.size()), ".fatbin.c\"\n",
               "static void __nv_cudaEntityRegisterCallback(void **__T7) {}\n");
  if (name.ends_with(".module_id")) return "_id_" + name;
  return "made " + file.string();
}

// An object cache in memory.
class MemoryObjectCache : public ObjectCache {
 public:
  bool has_object(const std::string& key) override { return objects.count(key) > 0; }
  bool has_device_part(const std::string& key, const std::vector<fs::path>& files) override {
    auto it = device_parts.find(key);
    if (it == device_parts.end() || it->second.size() != files.size()) return false;
    for (std::size_t f = 0; f < files.size(); ++f)
      if (it->second[f].first != files[f]) return false;
    return true;
  }
  std::optional<std::string> peek_manifest(const std::string& command_key) override {
    auto it = manifests.find(command_key);
    return it == manifests.end() ? std::nullopt : std::optional(it->second);
  }
  bool restore_object(const std::string& key, const fs::path& object) override {
    ++restores;
    auto it = objects.find(key);
    return it != objects.end() && write_file_atomic(object, it->second);
  }
  Expected<void> store_object(const std::string& key, const fs::path& object) override {
    KILN_TRY(objects[key], read_file(object));
    return {};
  }
  bool restore_device_part(const std::string& key, const std::vector<fs::path>& files) override {
    ++restores;
    auto it = device_parts.find(key);
    if (it == device_parts.end() || it->second.size() != files.size()) return false;
    for (std::size_t f = 0; f < files.size(); ++f)
      if (it->second[f].first != files[f] || !write_file_atomic(files[f], it->second[f].second))
        return false;
    return true;
  }
  Expected<void> store_device_part(const std::string& key,
                                   const std::vector<fs::path>& files) override {
    PackedFiles packed;
    for (const auto& f : files) {
      KILN_TRY(std::string data, read_file(f));
      packed.emplace_back(f, std::move(data));
    }
    device_parts[key] = std::move(packed);
    return {};
  }
  std::optional<std::string> load_manifest(const std::string& command_key) override {
    auto it = manifests.find(command_key);
    return it == manifests.end() ? std::nullopt : std::optional(it->second);
  }
  Expected<void> store_manifest(const std::string& command_key, std::string_view text) override {
    manifests[command_key] = text;
    return {};
  }
  std::map<std::string, std::string> objects;
  std::map<std::string, PackedFiles> device_parts;
  std::map<std::string, std::string> manifests;
  std::size_t restores = 0;  // calls of restore_object and restore_device_part
};

// Every entry under `root` (not following links): its type, size, mtime (ns) and bytes' sha256.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    struct stat st {};
    EXPECT_EQ(::lstat(entry.path().c_str(), &st), 0) << entry.path();
    std::string row =
        cat(st.st_mode & S_IFMT, " ", st.st_size, " ", st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) row += " " + sha256_hex(read_file(entry.path()).value());
    out[fs::relative(entry.path(), root).string()] = std::move(row);
  }
  return out;
}

// The dependency file a fake compiler writes for `argv` (at its -MF): the source the command
// names (an existing .cu or .cpp file) and what `reads` says that source includes.
Expected<void> write_depfile(
    const std::vector<std::string>& argv,
    const std::function<std::vector<std::string>(const std::string&)>& reads) {
  auto mf = std::find(argv.begin(), argv.end(), "-MF");
  if (mf == argv.end() || mf + 1 == argv.end()) return {};
  auto source = std::find_if(argv.begin(), argv.end(), [](const std::string& w) {
    return (w.ends_with(".cu") || w.ends_with(".cpp")) && fs::is_regular_file(w);
  });
  if (source == argv.end()) return Error::failed("no source in " + join(argv, " "));
  std::string text = cat(*(mf + 1), ".out: ", *source);
  for (const auto& header : reads(*source)) text += " \\\n  " + header;
  return write_file_atomic(*(mf + 1), text + "\n");
}

// Starts jobs as the real runner does with one slot (the first ready job, in the given order),
// without their commands: `before`, then each declared output written (`content`), then
// `on_success`. Records the jobs it was given and the order it started them in.
class FakeRunner : public CommandRunner {
 public:
  Expected<JobStats> run(const std::vector<Job>& jobs, const RunnerOptions& options) override {
    given = jobs;
    slots = options.slots;
    JobStats stats;
    std::vector<bool> done(jobs.size(), false);
    for (std::size_t n = 0; n < jobs.size(); ++n) {
      auto ready = [&](std::size_t i) {
        return !done[i] && std::all_of(jobs[i].deps.begin(), jobs[i].deps.end(),
                                       [&](std::size_t d) { return done.at(d); });
      };
      std::size_t i = 0;
      while (i < jobs.size() && !ready(i)) ++i;
      if (i == jobs.size()) return Error::failed("no job is ready: the deps have a cycle");
      const Job& job = jobs[i];
      if (job.gate) {  // as the real runner asks it (no lease waits here)
        KILN_TRY(Gate gate, job.gate());
        if (gate == Gate::Done) {
          done[i] = true;
          stats.gated_done++;
          continue;
        }
      }
      started.push_back(job.label);
      if (job.before) KILN_CHECK(job.before());
      KILN_CHECK(write_depfile(job.argv, reads));
      for (const auto& step : job.then) KILN_CHECK(write_depfile(step, reads));
      for (const auto& file : job.outputs) KILN_CHECK(write_file_atomic(file, content(file)));
      if (job.on_success) KILN_CHECK(job.on_success());
      done[i] = true;
      stats.run++;
      stats.timings.push_back({job.label, 0, 0, 0});
    }
    return stats;
  }
  std::function<std::string(const fs::path&)> content = made;
  // What each source includes, for the dependency files.
  std::function<std::vector<std::string>(const std::string&)> reads = [](const std::string&) {
    return std::vector<std::string>{};
  };
  std::vector<Job> given;
  std::vector<std::string> started;
  int slots = 0;
};

const char* const kBwd0 = "causal_conv1d_bwd.cu[0/2]";
const char* const kBwd1 = "causal_conv1d_bwd.cu[1/2]";
const char* const kFwd = "causal_conv1d_fwd.cu";
const char* const kUpdate = "causal_conv1d_update.cu";
const std::vector<std::string> kCudaUnits = {kFwd, kBwd0, kBwd1, kUpdate};
const std::string kCxx = "g++ causal_conv1d.cpp";
const std::string kLink = "link causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so";
const std::string kArchList = "750,800,860,890,900,1000,1200";
const std::vector<std::string> kPidPrefix = {"unshare", "--pid", "--fork", "--kill-child", "--"};

std::string nvcc_text(const std::string& unit, const std::string& what) {
  return cat("nvcc ", unit, " ", what);
}
std::string fatbinary(const std::string& unit, const std::string& archs) {
  return cat("fatbinary ", unit, " ", archs);
}

// The jobs that will run: restore jobs (the objects the cache holds) left out.
std::set<std::string> labels(const JobGraph& graph) {
  std::set<std::string> out;
  for (const auto& j : graph.jobs)
    if (j.job_class != JobClass::Restore) out.insert(j.job.label);
  return out;
}

// The restore jobs: the objects and device parts the cache will restore.
std::size_t restores(const JobGraph& graph) {
  return static_cast<std::size_t>(
      std::count_if(graph.jobs.begin(), graph.jobs.end(),
                    [](const auto& j) { return j.job_class == JobClass::Restore; }));
}

const GraphJob& job(const JobGraph& graph, const std::string& label) {
  for (const auto& j : graph.jobs)
    if (j.job.label == label) return j;
  throw std::runtime_error("no job " + label);
}

// The jobs that run that `label` waits for (not the restore jobs).
std::set<std::string> deps(const JobGraph& graph, const std::string& label) {
  std::set<std::string> out;
  for (std::size_t d : job(graph, label).job.deps)
    if (graph.jobs.at(d).job_class != JobClass::Restore) out.insert(graph.jobs.at(d).job.label);
  return out;
}

class JobGraphTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(
        TempDir::create(fs::temp_directory_path(), "kiln-job-graph-").value());
    const fs::path source = kiln::test::source_dir();
    manifest_ = manifest::load_manifest(source / "manifests/causal-conv1d/1.7.0.toml",
                                        "causal-conv1d/1.7.0.toml", source / "patches")
                    .value();
    ctx_.manifest = &manifest_;
    ctx_.root = dir_->path() / "root";
    ctx_.cxx.path = "/usr/bin/g++";
    ctx_.cxx.version_text = "g++ (Debian 12.2.0-14) 12.2.0";
    ctx_.python.ext_suffix = ".cpython-311-x86_64-linux-gnu.so";
    ctx_.object_salt = "the toolchain's identity";
    ctx_.shards = {{"causal_conv1d_cuda/csrc/causal_conv1d_bwd.cu", 2}};
  }

  // Plans a build of `archs` in `slots` slots in a fresh build root (nothing left from an earlier
  // plan but what `cache` holds); `dry_run` answers nvcc's dry runs, `arch_list` is what
  // `nvcc --list-gpu-arch` said.
  JobGraph plan(const std::string& archs, int slots, ObjectCache& cache,
                const std::string& arch_list = kArchList,
                const std::function<Expected<std::string>(const std::vector<std::string>&)>&
                    dry_run = fake_dryrun) {
    std::error_code ec;
    fs::remove_all(ctx_.root, ec);
    fs::create_directories(ctx_.root / "obj");
    fs::create_directories(ctx_.root / "out");
    for (const auto& ext : manifest_.extensions)
      for (const auto& src : ext.sources)
        EXPECT_TRUE(write_file_atomic(ctx_.root / "src" / src, "// " + src + "\n"));
    ctx_.archs = manifest::ArchList::parse(archs).value();
    PlanInput in;
    in.ctx = &ctx_;
    in.slots = slots;
    in.units = translation_units(ctx_);
    // Sizes as the sources' (the backward file is the largest), for the order among ready jobs.
    for (auto& u : in.units)
      u.source_bytes = u.source.ends_with("bwd.cu")   ? 90000
                       : u.source.ends_with("fwd.cu") ? 40000
                       : u.source.ends_with(".cu")    ? 20000
                                                      : 15000;
    in.arch_list = arch_list;
    in.pid_prefix = kPidPrefix;
    in.dry_runs = dry_run_commands(ctx_, in.units, in.arch_list);
    for (const auto& d : in.dry_runs.directories) fs::create_directories(d);
    for (const auto& command : in.dry_runs.commands) in.dry_outputs.push_back(dry_run(command));
    dry_commands_ = in.dry_runs.commands;
    return plan_jobs(std::move(in), cache);
  }

  fs::path keep(const std::string& tag) const {
    return ctx_.root / "keep" / ("causal_conv1d_cuda." + tag);
  }

  std::unique_ptr<TempDir> dir_;
  manifest::Manifest manifest_;
  NativeContext ctx_;
  std::vector<std::vector<std::string>> dry_commands_;
};

}  // namespace

TEST_F(JobGraphTest, SourcesBecomeShardsInLinkOrder) {
  std::vector<Unit> units = translation_units(ctx_);
  std::vector<std::string> names;
  for (const auto& u : units) names.push_back(u.name);
  EXPECT_EQ(names, (std::vector<std::string>{"causal_conv1d.cpp", kFwd, kBwd0, kBwd1, kUpdate}));
  EXPECT_EQ(units[2].defines, (std::vector<std::string>{"-DCAUSAL_CONV1D_BWD_SHARD=0",
                                                        "-DCAUSAL_CONV1D_BWD_SHARDS=2"}));
  EXPECT_EQ(units[3].tag, "csrc_causal_conv1d_bwd.cu.1-of-2");
  EXPECT_EQ(units[3].object,
            ctx_.root / "obj/causal_conv1d_cuda.csrc_causal_conv1d_bwd.cu.1-of-2.o");
  EXPECT_DOUBLE_EQ(units[2].share, 0.5);  // 9 of the 18 instantiations each
  EXPECT_TRUE(units[2].sharded);
  EXPECT_FALSE(units[1].sharded);
  EXPECT_TRUE(units[1].defines.empty());

  // More shards than the source's units are as many as it has; none asked for is one.
  ctx_.shards = {{"causal_conv1d_cuda/csrc/causal_conv1d_bwd.cu", 40}};
  EXPECT_EQ(translation_units(ctx_).size(), 3u + 18u);
  ctx_.shards.clear();
  units = translation_units(ctx_);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(units[2].name, "causal_conv1d_bwd.cu");
  EXPECT_TRUE(units[2].defines.empty());
}

// Floors below glibc 2.32 put kiln's compat headers first on every host compile's include path
// (g++ and nvcc, whose -I reaches its host passes); newer floors do without.
TEST_F(JobGraphTest, CompatHeadersForFloorsBelowGlibc232) {
  const std::string compat = "-I" + compat_dir(ctx_.root).string();
  auto has_compat = [&](const std::vector<std::string>& argv) {
    return std::find(argv.begin(), argv.end(), compat) != argv.end();
  };
  const manifest::Extension& ext = manifest_.extensions[0];
  ctx_.manylinux = 28;
  EXPECT_TRUE(has_compat(cxx_compile_argv(ctx_, ext, {}, "a.cpp", "a.o")));
  EXPECT_TRUE(has_compat(nvcc_flags(ctx_, ext, {})));
  fs::path dir = write_compat_headers(ctx_.root, 28).value();
  EXPECT_EQ(dir, compat_dir(ctx_.root));
  std::string header = read_file(dir / "sys" / "single_threaded.h").value();
  EXPECT_NE(header.find("static const char __libc_single_threaded"), std::string::npos);
  EXPECT_NE(header.find("#define _SYS_SINGLE_THREADED_H"), std::string::npos);
  ctx_.manylinux = 34;
  EXPECT_FALSE(has_compat(cxx_compile_argv(ctx_, ext, {}, "a.cpp", "a.o")));
  EXPECT_FALSE(has_compat(nvcc_flags(ctx_, ext, {})));
  EXPECT_EQ(write_compat_headers(ctx_.root / "other", 34).value(), fs::path());
}

TEST_F(JobGraphTest, LinkKeysAndACxxKindReachTheLink) {
  const fs::path r = ctx_.root;
  const std::vector<std::string> torch_cpu = {"-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"};
  // Without the keys: cpp_extension's link, as before.
  std::vector<std::string> want = {"/usr/bin/g++",
                                   "-shared",
                                   "-Wl,-O1",
                                   "-Wl,--as-needed",
                                   "a.o",
                                   "-L" + (r / "torch/lib").string(),
                                   "-L" + (r / "cuda/lib64").string()};
  append(want, torch_cpu);
  append(want, {"-lcudart", "-lc10_cuda", "-ltorch_cuda", "-o", "m.so"});
  EXPECT_EQ(link_argv(ctx_, manifest_.extensions[0], {"a.o"}, "m.so"), want);

  // A C++-only extension with libraries, a library directory and extra arguments, planned: one
  // host compile and a link with no CUDA library, directory or header.
  manifest::Extension& e = manifest_.extensions[0];
  e.sources = {"csrc/causal_conv1d.cpp"};
  e.shards.clear();
  e.kind = "cxx";
  e.libraries = {"m"};
  e.library_dirs = {"lib"};
  e.extra_link_args = {"-Wl,-z,now"};
  ctx_.shards.clear();
  MemoryObjectCache cache;
  JobGraph graph = plan("9.0", 2, cache);
  EXPECT_EQ(labels(graph), (std::set<std::string>{kCxx, kLink}));
  const fs::path out = r / "out/causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so";
  want = {"/usr/bin/g++",
          "-shared",
          "-Wl,-O1",
          "-Wl,--as-needed",
          (r / "obj/causal_conv1d_cuda.csrc_causal_conv1d.cpp.o").string(),
          "-L" + (r / "src/lib").string(),
          "-L" + (r / "torch/lib").string(),
          "-lm"};
  append(want, torch_cpu);
  append(want, {"-o", out.string(), "-Wl,-z,now"});
  EXPECT_EQ(job(graph, kLink).job.argv, want);
  const auto& compile = job(graph, kCxx).job.argv;
  EXPECT_FALSE(contains(compile, "-I" + (r / "cuda/include").string())) << join(compile, " ");
  EXPECT_TRUE(contains(compile, "-I" + (r / "torch/include").string())) << join(compile, " ");
}

TEST_F(JobGraphTest, ColdBuildIsPerArchDeviceJobsFrontEndsHostsFatBinariesAndALink) {
  MemoryObjectCache cache;
  JobGraph graph = plan("9.0", 16, cache);  // 4 device parts, fewer than the slots: front ends
  // Four dry runs per CUDA unit (sm_90, host, fat binary, front end), each shard with its defines.
  ASSERT_EQ(dry_commands_.size(), 4u * 4u);
  for (std::size_t k : {0, 1}) {
    const auto& command = dry_commands_[(1 + k) * 4];  // the bwd shard's device dry run
    EXPECT_TRUE(contains(command, cat("-DCAUSAL_CONV1D_BWD_SHARD=", k)));
    EXPECT_TRUE(contains(command, "-DCAUSAL_CONV1D_BWD_SHARDS=2"));
    EXPECT_TRUE(contains(command,
                         (keep(cat("csrc_causal_conv1d_bwd.cu.", k, "-of-2")) / "sm_90").string()));
  }

  std::map<std::string, JobClass> classes;
  for (const auto& j : graph.jobs) classes[j.job.label] = j.job_class;
  std::map<std::string, JobClass> expected = {{kCxx, JobClass::HostCxx}, {kLink, JobClass::Link}};
  for (const auto& u : kCudaUnits) {
    const bool sharded = u == kBwd0 || u == kBwd1;
    expected[nvcc_text(u, "sm_90")] = sharded ? JobClass::ShardedDevice : JobClass::Device;
    expected[nvcc_text(u, "front end")] = JobClass::FrontEnd;
    expected[nvcc_text(u, "host")] = JobClass::HostOrFatBinary;
    expected[fatbinary(u, "sm_90")] = JobClass::HostOrFatBinary;
  }
  EXPECT_EQ(classes, expected);
  EXPECT_EQ(graph.jobs.size(), expected.size());
  EXPECT_EQ(restores(graph), 0u);

  // The host part takes its stub from the front end; the fat binary waits for every pass; the
  // link for every object.
  for (const auto& u : kCudaUnits) {
    EXPECT_EQ(deps(graph, nvcc_text(u, "host")), std::set<std::string>{nvcc_text(u, "front end")});
    EXPECT_EQ(deps(graph, fatbinary(u, "sm_90")),
              (std::set<std::string>{nvcc_text(u, "sm_90"), nvcc_text(u, "host")}));
    EXPECT_TRUE(deps(graph, nvcc_text(u, "sm_90")).empty());
    EXPECT_TRUE(deps(graph, nvcc_text(u, "front end")).empty());
  }
  std::set<std::string> objects = {kCxx};
  for (const auto& u : kCudaUnits) objects.insert({nvcc_text(u, "host"), fatbinary(u, "sm_90")});
  EXPECT_EQ(deps(graph, kLink), objects);

  // nvcc's own commands, each in a PID namespace, __CUDA_ARCH_LIST__ set to every arch nvcc knows.
  const Job& device = job(graph, nvcc_text(kBwd1, "sm_90")).job;
  ASSERT_EQ(device.then.size(), 2u);  // preprocess, cicc, ptxas
  EXPECT_EQ(std::vector<std::string>(device.argv.begin(), device.argv.begin() + 5), kPidPrefix);
  EXPECT_TRUE(contains(device.argv, "-D__CUDA_ARCH_LIST__=" + kArchList));
  EXPECT_TRUE(contains(device.argv, "-DCAUSAL_CONV1D_BWD_SHARD=1"));
  EXPECT_EQ(device.then[0][5], "/fake-cuda/nvvm/bin/cicc");
  EXPECT_TRUE(contains(device.then[0], "compute_90"));
  EXPECT_EQ(device.then[1][5], "/fake-cuda/bin/ptxas");
  const Job& front = job(graph, nvcc_text(kFwd, "front end")).job;
  ASSERT_EQ(front.then.size(), 1u);  // preprocess, cicc at -O0
  EXPECT_TRUE(contains(front.then[0], "-O0"));
  const Job& host = job(graph, nvcc_text(kFwd, "host")).job;
  ASSERT_EQ(host.then.size(), 2u);  // preprocess, cudafe++, host compile
  EXPECT_EQ(host.then[0][5], "/fake-cuda/bin/cudafe++");
  EXPECT_FALSE(contains(host.then[0], "--gen_module_id_file"));  // it reads the front end's
  EXPECT_EQ(host.then[1].back(),
            (ctx_.root / "obj/causal_conv1d_cuda.csrc_causal_conv1d_fwd.cu.o").string());
  const Job& fat = job(graph, fatbinary(kFwd, "sm_90")).job;
  const fs::path fwd = keep("csrc_causal_conv1d_fwd.cu");
  EXPECT_TRUE(contains(fat.argv, cat("--image3=kind=elf,sm=90,file=",
                                     (fwd / "sm_90/causal_conv1d_fwd.sm_90.cubin").string())))
      << join(fat.argv, " ");
  EXPECT_EQ(fat.argv.back(), "-compress-all");
  const fs::path fatbin_object =
      ctx_.root / "obj/causal_conv1d_cuda.csrc_causal_conv1d_fwd.cu.fatbin.o";
  ASSERT_EQ(fat.then.size(), 1u);
  EXPECT_EQ(fat.then[0],
            (std::vector<std::string>{"/usr/bin/g++", "-c", (fwd / "fatbin/fatbin.s").string(),
                                      "-o", fatbin_object.string()}));
  // The link: every unit's objects in the manifest's order, its fat binary after its host part.
  const Job& link = job(graph, kLink).job;
  std::vector<std::string> linked;
  for (const auto& w : link.argv)
    if (w.ends_with(".o")) linked.push_back(fs::path(w).filename().string());
  EXPECT_EQ(linked, (std::vector<std::string>{
                        "causal_conv1d_cuda.csrc_causal_conv1d.cpp.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_fwd.cu.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_fwd.cu.fatbin.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_bwd.cu.0-of-2.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_bwd.cu.0-of-2.fatbin.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_bwd.cu.1-of-2.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_bwd.cu.1-of-2.fatbin.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_update.cu.o",
                        "causal_conv1d_cuda.csrc_causal_conv1d_update.cu.fatbin.o"}));
  ASSERT_EQ(graph.modules.size(), 1u);
  EXPECT_EQ(graph.modules[0].wheel_path, "causal_conv1d_cuda.cpython-311-x86_64-linux-gnu.so");
}

TEST_F(JobGraphTest, TheRunnerStartsReadyJobsByRankThenLongestChainFirst) {
  MemoryObjectCache cache;
  JobGraph graph = plan("9.0", 16, cache);
  std::vector<Job> jobs = schedule(graph);
  std::vector<std::string> order;
  for (const auto& j : jobs) order.push_back(j.label);
  EXPECT_EQ(order,
            (std::vector<std::string>{
                // Host parts and fat binaries (they unblock the link), longest chain
                // first: a host part before the fat binary that waits for it.
                nvcc_text(kBwd0, "host"), nvcc_text(kBwd1, "host"), nvcc_text(kFwd, "host"),
                fatbinary(kBwd0, "sm_90"), fatbinary(kBwd1, "sm_90"), fatbinary(kFwd, "sm_90"),
                nvcc_text(kUpdate, "host"), fatbinary(kUpdate, "sm_90"),
                // The device parts, longest chain first (sharded or not), then host C++.
                nvcc_text(kBwd0, "sm_90"), nvcc_text(kBwd1, "sm_90"), nvcc_text(kFwd, "sm_90"),
                nvcc_text(kUpdate, "sm_90"), kCxx,
                // Front ends fill the slots the device parts leave.
                nvcc_text(kBwd0, "front end"), nvcc_text(kBwd1, "front end"),
                nvcc_text(kFwd, "front end"), nvcc_text(kUpdate, "front end"), kLink}));
  // Dependencies follow their jobs to their new places.
  auto at = [&](const std::string& label) {
    return static_cast<std::size_t>(std::find(order.begin(), order.end(), label) - order.begin());
  };
  EXPECT_EQ(jobs[at(nvcc_text(kFwd, "host"))].deps,
            std::vector<std::size_t>{at(nvcc_text(kFwd, "front end"))});
  EXPECT_EQ(jobs[at(fatbinary(kFwd, "sm_90"))].deps,
            (std::vector<std::size_t>{at(nvcc_text(kFwd, "sm_90")), at(nvcc_text(kFwd, "host"))}));

  // Run: every job once its deps are done; the link's module is made.
  FakeRunner runner;
  NativeResult result = run_graph(std::move(graph), runner, 16, 7).value();
  EXPECT_EQ(runner.started.size(), order.size());
  EXPECT_EQ(runner.slots, 16);
  EXPECT_EQ(runner.started.front(), nvcc_text(kBwd0, "sm_90"));  // the first ready one
  for (const auto& j : runner.given) EXPECT_EQ(j.inherit_fds, std::vector<int>{7});
  EXPECT_EQ(result.stats.run, order.size());
  ASSERT_EQ(result.modules.size(), 1u);
  EXPECT_TRUE(fs::is_regular_file(result.modules[0].file));
  // Stored: the C++ object, each unit's host part and fat binary, each device part.
  EXPECT_EQ(cache.objects.size(), 1u + 2u * 4u);
  EXPECT_EQ(cache.device_parts.size(), 4u);
}

TEST_F(JobGraphTest, AddingAnArchRunsOnlyItsDevicePartsAndTheFatBinaries) {
  MemoryObjectCache cache;
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();

  // The same archs again: every object is restored; only the link runs.
  JobGraph again = plan("9.0", 16, cache);
  EXPECT_EQ(labels(again), std::set<std::string>{kLink});
  EXPECT_EQ(restores(again), 1u + 2u * 4u);

  // sm_120 with PTX added: the host parts (keyed by the lowest arch's commands) and the C++
  // object are restored, and so are the sm_90 device parts, which the new fat binaries hold.
  JobGraph added = plan("9.0;12.0+PTX", 16, cache);
  std::set<std::string> expected = {kLink};
  for (const auto& u : kCudaUnits)
    expected.insert({nvcc_text(u, "sm_120+ptx"), fatbinary(u, "sm_90,sm_120")});
  EXPECT_EQ(labels(added), expected);
  EXPECT_EQ(restores(added), 2u * 4u + 1u);  // sm_90 device parts, host parts, C++ object
  for (const auto& u : kCudaUnits)
    EXPECT_EQ(deps(added, fatbinary(u, "sm_90,sm_120")),
              std::set<std::string>{nvcc_text(u, "sm_120+ptx")});
  const fs::path fwd = keep("csrc_causal_conv1d_fwd.cu");
  const Job& fat = job(added, fatbinary(kFwd, "sm_90,sm_120")).job;
  for (const auto& image :
       {cat("kind=elf,sm=90,file=", (fwd / "sm_90/causal_conv1d_fwd.sm_90.cubin").string()),
        cat("kind=ptx,sm=120,file=", (fwd / "sm_120-ptx/causal_conv1d_fwd.ptx").string()),
        cat("kind=elf,sm=120,file=", (fwd / "sm_120-ptx/causal_conv1d_fwd.sm_120.cubin").string())})
    EXPECT_TRUE(contains(fat.argv, "--image3=" + image)) << image;

  FakeRunner warm;
  NativeResult result = run_graph(std::move(added), warm, 16, -1).value();
  EXPECT_EQ(result.stats.run, expected.size());
  EXPECT_EQ(result.objects_reused, 2u * 4u + 1u);
  EXPECT_EQ(read_file(fwd / "sm_90/causal_conv1d_fwd.module_id").value(),
            "_id_causal_conv1d_fwd.module_id");  // restored where the fat binary reads it
}

TEST_F(JobGraphTest, ObjectsAreKeyedByWhatTheirJobsRead) {
  // Two torch releases seen at one path, as a target's torch/ link in the build root: every
  // source includes torch.h, the backward file also bwd.h.
  MemoryObjectCache cache;
  const fs::path torch = dir_->path() / "torch";
  auto release = [&](const std::string& bwd) {
    write_file_atomic(torch / "torch.h", "// torch\n").value();
    write_file_atomic(torch / "bwd.h", bwd).value();
  };
  auto reads = [&](const std::string& source) {
    std::vector<std::string> headers = {(torch / "torch.h").string()};
    if (source.ends_with("bwd.cu")) headers.push_back((torch / "bwd.h").string());
    return headers;
  };
  release("// 2.12\n");
  FakeRunner cold;
  cold.reads = reads;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});

  // A release that changes only the backward file's own header: its two shards compile again
  // (the changed header always misses), the other units' objects are the first release's.
  release("// 2.13\n");
  JobGraph next = plan("9.0", 16, cache);
  std::set<std::string> expected = {kLink};
  for (const auto& u : {kBwd0, kBwd1})
    expected.insert({nvcc_text(u, "sm_90"), nvcc_text(u, "front end"), nvcc_text(u, "host"),
                     fatbinary(u, "sm_90")});
  EXPECT_EQ(labels(next), expected);
  EXPECT_EQ(restores(next), 1u + 2u * 2u);  // C++, and fwd's and update's host and fat binary
  FakeRunner warm;
  warm.reads = reads;
  run_graph(std::move(next), warm, 16, -1).value();
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});

  // Back to the first release: its dependency sets are still recorded, every object is reused.
  release("// 2.12\n");
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});
  // A header a unit read gone: a miss, not an error.
  fs::remove(torch / "torch.h");
  EXPECT_EQ(labels(plan("9.0", 16, cache)).size(), 1u + 1u + 4u * 4u);
}

TEST_F(JobGraphTest, WithFewerSlotsThanDevicePartsAHostPartWaitsForTheLowestArch) {
  MemoryObjectCache cache;
  JobGraph graph = plan("9.0;12.0+PTX", 4, cache);  // 8 device parts, 4 slots: no front ends
  for (const auto& u : kCudaUnits) {
    EXPECT_EQ(deps(graph, nvcc_text(u, "host")), std::set<std::string>{nvcc_text(u, "sm_90")});
    EXPECT_EQ(deps(graph, fatbinary(u, "sm_90,sm_120")),
              (std::set<std::string>{nvcc_text(u, "sm_90"), nvcc_text(u, "sm_120+ptx"),
                                     nvcc_text(u, "host")}));
  }
  for (const auto& l : labels(graph)) EXPECT_FALSE(l.ends_with("front end")) << l;
  FakeRunner runner;
  run_graph(std::move(graph), runner, 4, -1).value();
  EXPECT_EQ(runner.started.size(), 1u + 4u * 4u + 1u);
}

TEST_F(JobGraphTest, WhatNvccCannotSplitIsOneNvccForAllArchs) {
  // An nvcc that cannot list its archs: no dry runs, every CUDA unit one nvcc.
  MemoryObjectCache cache;
  JobGraph graph = plan("9.0;12.0+PTX", 2, cache, "");
  EXPECT_TRUE(dry_commands_.empty());
  std::set<std::string> expected = {kCxx, kLink};
  for (const auto& u : kCudaUnits) expected.insert(nvcc_text(u, "sm_90,sm_120"));
  EXPECT_EQ(labels(graph), expected);
  const GraphJob& bwd = job(graph, nvcc_text(kBwd0, "sm_90,sm_120"));
  EXPECT_EQ(bwd.job_class, JobClass::ShardedDevice);
  EXPECT_EQ(job(graph, nvcc_text(kFwd, "sm_90,sm_120")).job_class, JobClass::Device);
  EXPECT_EQ(bwd.job.weight, 2);  // --threads: three gencodes, two slots
  EXPECT_TRUE(contains(bwd.job.argv, "--threads"));
  EXPECT_EQ(std::vector<std::string>(bwd.job.argv.begin(), bwd.job.argv.begin() + 5), kPidPrefix);
  EXPECT_DOUBLE_EQ(bwd.estimate, 45000.0 * 2);  // its share, for each arch
  std::set<std::string> objects = expected;
  objects.erase(kLink);
  EXPECT_EQ(deps(graph, kLink), objects);

  // A dry run kiln cannot take apart: that unit alone is one nvcc.
  JobGraph mixed = plan("9.0", 16, cache, kArchList, [](const std::vector<std::string>& argv) {
    bool update = std::any_of(argv.begin(), argv.end(),
                              [](const std::string& w) { return w.ends_with("update.cu"); });
    return update ? Expected<std::string>(Error::failed("nvcc --dryrun failed"))
                  : Expected<std::string>(fake_dryrun(argv));
  });
  EXPECT_TRUE(contains(job(mixed, nvcc_text(kUpdate, "sm_90")).job.argv, "--threads"));
  EXPECT_FALSE(labels(mixed).count(nvcc_text(kUpdate, "host")));
  EXPECT_TRUE(labels(mixed).count(nvcc_text(kFwd, "host")));
}

TEST_F(JobGraphTest, PassesThatDisagreeOnTheStubStopTheFatBinary) {
  MemoryObjectCache cache;
  FakeRunner runner;
  runner.content = [](const fs::path& file) {
    std::string bytes = made(file);
    if (file.parent_path().filename() == "sm_120-ptx" && file.string().ends_with(".stub.c"))
      bytes += "static void another_kernel() {}\n";
    return bytes;
  };
  auto result = run_graph(plan("9.0;12.0+PTX", 16, cache), runner, 16, -1);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("disagree on the host stub or module id"),
            std::string::npos)
      << result.error().message;
  EXPECT_TRUE(runner.started.back().starts_with("fatbinary ")) << runner.started.back();
}

TEST_F(JobGraphTest, DamagedCacheEntriesAreRebuiltNeverUsed) {
  cache::Store store(dir_->path() / "cache");
  StoreObjectCache cache(store);
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  // One bit of every stored object flipped (the device parts are left whole).
  std::size_t damaged = 0;
  for (const auto& entry : fs::recursive_directory_iterator(layout(store).objects())) {
    if (entry.path().extension() != ".o") continue;
    std::string bytes = read_file(entry.path()).value();
    bytes.back() ^= 1;
    write_file_atomic(entry.path(), bytes).value();
    ++damaged;
  }
  EXPECT_EQ(damaged, 1u + 2u * 4u);
  // Every object is built again; the host parts take their stub from the restored sm_90 parts.
  JobGraph again = plan("9.0", 16, cache);
  std::set<std::string> expected = {kCxx, kLink};
  for (const auto& u : kCudaUnits) expected.insert({nvcc_text(u, "host"), fatbinary(u, "sm_90")});
  EXPECT_EQ(labels(again), expected);
  EXPECT_EQ(restores(again), 4u);  // the sm_90 device parts
  for (const auto& u : kCudaUnits) EXPECT_TRUE(deps(again, nvcc_text(u, "host")).empty());
  FakeRunner warm;
  run_graph(std::move(again), warm, 16, -1).value();
  // Stored anew, whole: the next build restores everything.
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});
}

// Planning reads the object cache and writes nothing: no entry of the cache changes (bytes or
// mtime), a damaged entry stays where it is, and nothing is restored into the build root until
// the graph runs; then a damaged entry's job runs again and its bytes are never used.
TEST_F(JobGraphTest, PlanningWritesNothing) {
  cache::Store store(dir_->path() / "cache");
  StoreObjectCache cache(store);
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  auto built = [&] {  // what the build root's obj/ holds
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(ctx_.root / "obj"))
      files.push_back(e.path());
    return files;
  };
  auto unwritten = [](const JobGraph& graph) {
    for (const auto& j : graph.jobs)
      for (const auto& out : j.job.outputs) EXPECT_FALSE(fs::exists(out)) << out;
  };

  auto before = snapshot(store.root());
  JobGraph warm = plan("9.0", 16, cache);
  EXPECT_EQ(snapshot(store.root()), before);
  EXPECT_TRUE(built().empty());
  unwritten(warm);
  FakeRunner runner;
  NativeResult result = run_graph(std::move(warm), runner, 16, -1).value();
  EXPECT_EQ(runner.started, std::vector<std::string>{kLink});
  EXPECT_EQ(result.objects_reused, 1u + 2u * 4u);
  EXPECT_EQ(built().size(), 1u + 2u * 4u);

  // One object's bit flipped.
  fs::path damaged;
  for (const auto& e : fs::recursive_directory_iterator(layout(store).objects()))
    if (damaged.empty() && e.path().extension() == ".o") damaged = e.path();
  ASSERT_FALSE(damaged.empty());
  std::string bytes = read_file(damaged).value();
  bytes.back() ^= 1;
  write_file_atomic(damaged, bytes).value();
  const std::string payload = bytes.substr(bytes.find('\n') + 1);
  before = snapshot(store.root());
  JobGraph again = plan("9.0", 16, cache);
  EXPECT_EQ(snapshot(store.root()), before);  // not removed by planning
  EXPECT_TRUE(built().empty());
  unwritten(again);
  FakeRunner rebuild;
  run_graph(std::move(again), rebuild, 16, -1).value();
  ASSERT_EQ(rebuild.started.size(), 2u);  // the damaged object's job, then the link
  EXPECT_EQ(rebuild.started.back(), kLink);
  EXPECT_EQ(built().size(), 1u + 2u * 4u);
  for (const auto& file : built()) EXPECT_NE(read_file(file).value(), payload) << file;
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});  // stored anew
}

// The planner asks the cache what it holds; the restores happen when the jobs run.
TEST_F(JobGraphTest, RestoresHappenWhenTheGraphRuns) {
  MemoryObjectCache cache;
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  cache.restores = 0;
  JobGraph added = plan("9.0;12.0+PTX", 16, cache);
  EXPECT_EQ(cache.restores, 0u);
  FakeRunner runner;
  NativeResult result = run_graph(std::move(added), runner, 16, -1).value();
  EXPECT_EQ(cache.restores, 2u * 4u + 1u);  // sm_90 device parts, host parts, C++ object
  EXPECT_EQ(result.objects_reused, 2u * 4u + 1u);
  EXPECT_EQ(result.stats.run, 1u + 2u * 4u);  // sm_120 device parts, fat binaries, the link
}

// A hit gone or damaged by the time its restore job runs (evicted, or damaged, since the plan):
// the job runs its command after all, and the damaged bytes are never used.
TEST_F(JobGraphTest, AHitLostAfterPlanningIsMadeAfterAll) {
  cache::Store store(dir_->path() / "cache");
  StoreObjectCache cache(store);
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  const fs::path cxx = ctx_.root / "obj/causal_conv1d_cuda.csrc_causal_conv1d.cpp.o";
  fs::path entry;
  for (const auto& e : fs::recursive_directory_iterator(layout(store).objects())) {
    if (!e.is_regular_file()) continue;
    const std::string data = read_file(e.path()).value();
    auto payload = cache::entry_payload(data);
    if (payload && *payload == made(cxx)) entry = e.path();
  }
  ASSERT_FALSE(entry.empty());
  JobGraph graph = plan("9.0", 16, cache);
  std::string bytes = read_file(entry).value();
  bytes.back() ^= 1;
  write_file_atomic(entry, bytes).value();
  FakeRunner runner;
  runner.content = [](const fs::path& file) { return "again " + made(file); };
  NativeResult result = run_graph(std::move(graph), runner, 16, -1).value();
  EXPECT_EQ(runner.started, (std::vector<std::string>{kCxx, kLink}));
  EXPECT_EQ(result.objects_reused, 2u * 4u);
  EXPECT_EQ(read_file(cxx).value(), "again " + made(cxx));
  EXPECT_EQ(labels(plan("9.0", 16, cache)), std::set<std::string>{kLink});  // stored anew

  // The sm_90 device parts gone when an added arch's graph runs: their jobs run.
  JobGraph added = plan("9.0;12.0+PTX", 16, cache);
  for (const auto& e : fs::recursive_directory_iterator(layout(store).objects()))
    if (e.path().extension() == ".dev") fs::remove(e.path());
  FakeRunner rebuild;
  result = run_graph(std::move(added), rebuild, 16, -1).value();
  for (const auto& u : kCudaUnits)
    EXPECT_NE(std::find(rebuild.started.begin(), rebuild.started.end(), nvcc_text(u, "sm_90")),
              rebuild.started.end())
        << u;
  EXPECT_EQ(result.objects_reused, 1u + 4u);  // the C++ object and the host parts
}

// A restore job alone (the cache held the host part and the fat binary, so no device part was
// planned) whose entry is gone when it runs stops the run and marks the graph stale; planned
// again, the host part is compiled.
TEST_F(JobGraphTest, ARestoreAloneLostAfterPlanningStopsTheRunToPlanAgain) {
  MemoryObjectCache cache;
  FakeRunner cold;
  run_graph(plan("9.0", 16, cache), cold, 16, -1).value();
  const fs::path host = ctx_.root / "obj/causal_conv1d_cuda.csrc_causal_conv1d_fwd.cu.o";
  JobGraph graph = plan("9.0", 16, cache);
  const std::shared_ptr<bool> stale = graph.stale;
  const auto lost = std::find_if(cache.objects.begin(), cache.objects.end(),
                                 [&](const auto& o) { return o.second == made(host); });
  ASSERT_NE(lost, cache.objects.end());
  cache.objects.erase(lost);
  FakeRunner runner;
  auto ran = run_graph(std::move(graph), runner, 16, -1);
  ASSERT_FALSE(ran);
  EXPECT_NE(ran.error().message.find(nvcc_text(kFwd, "host")), std::string::npos)
      << ran.error().message;
  EXPECT_TRUE(*stale);
  JobGraph again = plan("9.0", 16, cache);
  EXPECT_EQ(labels(again), (std::set<std::string>{nvcc_text(kFwd, "host"), kLink}));
  EXPECT_FALSE(*again.stale);
  FakeRunner rerun;
  run_graph(std::move(again), rerun, 16, -1).value();
  EXPECT_EQ(rerun.started, (std::vector<std::string>{nvcc_text(kFwd, "host"), kLink}));
}

TEST(StoreObjectCache, DevicePartsComeBackOnlyToThePathsTheyWereStoredFrom) {
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-object-cache-").value();
  cache::Store store(dir.path() / "cache");
  StoreObjectCache cache(store);
  const std::string key(64, 'd');
  std::vector<fs::path> files = {dir.path() / "a.module_id", dir.path() / "a.stub.c"};
  write_file_atomic(files[0], "id").value();
  write_file_atomic(files[1], std::string("stub\n\0with a NUL", 16)).value();
  cache.store_device_part(key, files).value();
  fs::remove(files[0]);
  fs::remove(files[1]);
  EXPECT_FALSE(cache.restore_device_part(key, {files[0]}));
  EXPECT_FALSE(cache.restore_device_part(key, {files[1], files[0]}));
  EXPECT_FALSE(cache.restore_device_part(std::string(64, 'e'), files));
  ASSERT_TRUE(cache.restore_device_part(key, files));
  EXPECT_EQ(read_file(files[1]).value(), std::string("stub\n\0with a NUL", 16));
  EXPECT_EQ(unpack_files(pack_files({{"/x", "12\n3"}})).value(), (PackedFiles{{"/x", "12\n3"}}));
  EXPECT_FALSE(unpack_files("kiln-device-part 1\n/x\n9\nshort"));
  EXPECT_FALSE(unpack_files("something else\n"));
}

}  // namespace kiln::compile
