#include "compile/job_graph.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include "compile/content_key.h"
#include "compile/flags.h"
#include "compile/nvcc_split.h"
#include "core/clock.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/sandbox.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// A shard's defines: -D<index>=k -D<count>=n (none when n is 1).
std::vector<std::string> shard_defines(const manifest::Shardable& shard, int index, int count) {
  if (count <= 1) return {};
  return {cat("-D", shard.index_define, "=", index), cat("-D", shard.count_define, "=", count)};
}

// The shards of one source (one unit when it is not shardable or resolve chose one).
void add_units(const NativeContext& ctx, const manifest::Extension& ext, const std::string& src,
               std::vector<Unit>& units) {
  std::string stem = src;
  std::replace(stem.begin(), stem.end(), '/', '_');
  const manifest::Shardable* shard = nullptr;
  for (const auto& s : ext.shards)
    if (s.source == src) shard = &s;
  auto it = ctx.shards.find(ext.name + "/" + src);
  int count = shard && it != ctx.shards.end() ? std::clamp(it->second, 1, shard->units) : 1;
  std::string file = fs::path(src).filename().string();
  for (int k = 0; k < count; ++k) {
    Unit u;
    u.ext = &ext;
    u.source = src;
    u.defines = shard ? shard_defines(*shard, k, count) : std::vector<std::string>{};
    u.tag = count > 1 ? cat(stem, ".", k, "-of-", count) : stem;
    u.name = count > 1 ? cat(file, "[", k, "/", count, "]") : file;
    // Units u with u % count == k.
    u.share = count > 1 ? static_cast<double>((shard->units - k + count - 1) / count) / shard->units
                        : 1.0;
    u.sharded = shard != nullptr;
    u.object = ctx.root / "obj" / (ext.name + "." + u.tag + ".o");
    units.push_back(std::move(u));
  }
}

fs::path keep_dir(const NativeContext& ctx, const Unit& u) {
  return ctx.root / "keep" / (u.ext->name + "." + u.tag);
}

// A split CUDA unit's second object: its fat binary.
fs::path fatbin_object(const NativeContext& ctx, const Unit& u) {
  return ctx.root / "obj" / (u.ext->name + "." + u.tag + ".fatbin.o");
}

// An arch token as a directory or log name: "sm_120+ptx" -> "sm_120-ptx".
std::string arch_dir(const std::string& token) {
  std::string d = token;
  std::replace(d.begin(), d.end(), '+', '-');
  return d;
}

}  // namespace

std::vector<Unit> translation_units(const NativeContext& ctx) {
  std::vector<Unit> units;
  for (const auto& ext : ctx.manifest->extensions)
    for (const auto& src : ext.sources) add_units(ctx, ext, src, units);
  return units;
}

namespace {

// One dry run: nvcc's flags for the unit, then `args`, then `gencodes`, keeping its
// intermediates in `dir`.
void add_dry_run(const NativeContext& ctx, const Unit& u, const fs::path& dir,
                 const std::vector<std::string>& args, const std::vector<std::string>& gencodes,
                 DryRuns& out) {
  std::vector<std::string> argv = {nvcc_path(ctx), "--dryrun"};
  append(argv, nvcc_flags(ctx, *u.ext, u.defines));
  append(argv, args);
  append(argv, gencodes);
  append(argv, {"--keep", "--keep-dir", dir.string()});
  out.commands.push_back(std::move(argv));
  out.directories.push_back(dir);
}

}  // namespace

DryRuns dry_run_commands(const NativeContext& ctx, const std::vector<Unit>& units,
                         const std::string& arch_list) {
  DryRuns out;
  const std::vector<manifest::ArchList> entries = ctx.archs.each();
  for (const Unit& u : units) {
    out.first.push_back(out.commands.size());
    if (!u.source.ends_with(".cu") || arch_list.empty()) continue;
    const std::string source = (ctx.root / "src" / u.source).string();
    const std::string stem = fs::path(u.source).stem().string();
    const fs::path keep = keep_dir(ctx, u);
    for (std::size_t a = 0; a < entries.size(); ++a) {
      fs::path dir = keep / arch_dir(entries[a].canonical());
      add_dry_run(ctx, u, dir, {"--fatbin", source, "-o", (dir / (stem + ".fatbin")).string()},
                  entries[a].gencode_flags(), out);
    }
    // The host part from a dry run of the lowest arch alone (nvcc names its intermediates and
    // defines __CUDA_ARCH__ after the last arch: the host part is then the same for every arch
    // set with that lowest arch); the fat binary of all archs from a dry run of all.
    add_dry_run(ctx, u, keep / "host", {"-c", source, "-o", u.object.string()},
                entries.front().gencode_flags(), out);
    add_dry_run(ctx, u, keep / "fatbin", {"-c", source, "-o", u.object.string()},
                ctx.archs.gencode_flags(), out);
    fs::path front = keep / "front";
    add_dry_run(ctx, u, front,
                {"-Xcicc", "-O0", "--fatbin", source, "-o", (front / (stem + ".fatbin")).string()},
                entries.front().gencode_flags(), out);
  }
  return out;
}

namespace {

// What a CUDA unit becomes when nvcc's dry runs split per arch.
struct SplitUnit {
  std::vector<nvcc::DevicePart> devices;  // one per arch, in the target's order
  std::vector<std::string> device_labels;
  nvcc::HostPart host;
  nvcc::DevicePart front;  // the lowest arch's front end: the host part's stub and module id
  nvcc::Env env;
};

// A unit's dry-run outputs (`outputs` points at its first: one per arch, then the host part's,
// the fat binary's and the front end's), taken apart; an error says why kiln cannot split it.
Expected<SplitUnit> split_unit(const Expected<std::string>* outputs,
                               const std::vector<std::string>& arch_tokens,
                               const std::string& arch_list) {
  auto parse = [&](std::size_t a) -> Expected<nvcc::DryRun> {
    if (!outputs[a]) return outputs[a].error();
    return nvcc::parse_dryrun(*outputs[a]);
  };
  SplitUnit su;
  std::vector<nvcc::Image> images;
  const std::size_t n = arch_tokens.size();
  for (std::size_t a = 0; a < n; ++a) {
    KILN_TRY(nvcc::DryRun run, parse(a));
    KILN_TRY(nvcc::DevicePart part, nvcc::device_part(run, arch_list));
    images.insert(images.end(), part.images.begin(), part.images.end());
    su.devices.push_back(std::move(part));
    su.device_labels.push_back(arch_tokens[a]);
  }
  KILN_TRY(nvcc::DryRun host_run, parse(n));
  KILN_TRY(su.host,
           nvcc::host_part(host_run, arch_list, su.devices.front().images, kFatbinaryFlags));
  su.env = host_run.env;
  KILN_TRY(nvcc::DryRun all_run, parse(n + 1));
  KILN_TRY(nvcc::HostPart all, nvcc::host_part(all_run, arch_list, images, kFatbinaryFlags));
  su.host.fatbinary = std::move(all.fatbinary);
  su.host.fatbin = std::move(all.fatbin);
  KILN_TRY(nvcc::DryRun front_run, parse(n + 2));
  KILN_TRY(su.front, nvcc::front_end_part(front_run, arch_list));
  return su;
}

using Steps = std::vector<std::vector<std::string>>;

std::string join_commands(const Steps& steps) {
  std::vector<std::string> lines;
  for (const auto& s : steps) lines.push_back(join(s, "\x1f"));
  return join(lines, "\x1e");
}

// A split unit's commands, command keys (content_key.h) and dependency files.
struct SplitCommands {
  std::vector<Steps> device_steps;  // per arch
  std::vector<std::string> device_keys;
  std::vector<fs::path> device_depfiles;
  Steps front_steps, host_steps;
  fs::path front_depfile, host_depfile;
  std::vector<std::string> fatbinary, assemble;  // the fat binary, then its object
  std::string reference;                         // the host part's x.fatbin.c
  std::string assembly;                          // the fat binary's object's source
  fs::path assembly_file;
  std::string host_key, fatbin_key;
  nvcc::Env env;  // the jobs' environment: kiln's, then nvcc's own
};

// What a split unit's jobs learn of its content keys as the build goes: each arch's device part's
// (from a manifest that matched, or from its job), and what the pass the host part's stub comes
// from read (the lowest arch's preprocessing, the same for its front end).
struct UnitKeys {
  std::vector<std::optional<std::string>> devices;
  std::optional<Deps> stub;
  bool host_staged = false;  // the host part's job ran here (not restored): its stub must agree
};

// A job's content key as its gate asks for it (nullopt: unknown, a miss).
using KeyOf = std::function<std::optional<Keyed>()>;

// The fat binary's content key: its commands' and every arch's device part's.
std::optional<std::string> fatbin_content_key(const std::string& command_key,
                                              const UnitKeys& keys) {
  std::string text = command_key;
  for (const auto& d : keys.devices) {
    if (!d) return std::nullopt;
    text += "," + *d;
  }
  return sha256_hex(text);
}

// The fat binary's content key as its gate asks for it.
KeyOf fatbin_key_of(const std::string& command_key, std::shared_ptr<UnitKeys> keys) {
  return [command_key, keys = std::move(keys)]() -> std::optional<Keyed> {
    auto key = fatbin_content_key(command_key, *keys);
    if (!key) return std::nullopt;
    return Keyed{*key, {}};
  };
}

// Adds -MD -MF `depfile` to the preprocessing step of `steps` (nvcc's gcc -E); false when none.
bool add_depfile(Steps& steps, const fs::path& depfile) {
  for (auto& step : steps) {
    const nvcc::Step kind = nvcc::classify(step);
    if (kind != nvcc::Step::DevicePreprocess && kind != nvcc::Step::HostPreprocess) continue;
    append(step, {"-MD", "-MF", depfile.string()});
    return true;
  }
  return false;
}

// The devices' passes that wrote a module id and stub, which must all agree.
using Written = std::vector<std::pair<fs::path, fs::path>>;

// Checks that every pass wrote the same module id and stub, then writes the fat binary's
// assembler source.
Expected<void> check_passes_agree(const std::string& name, const Written& written,
                                  const std::string& assembly, const fs::path& assembly_file) {
  KILN_TRY(std::string module_id, read_file(written.front().first));
  KILN_TRY(std::string stub, read_file(written.front().second));
  for (std::size_t p = 1; p < written.size(); ++p) {
    KILN_TRY(std::string other_id, read_file(written[p].first));
    KILN_TRY(std::string other_stub, read_file(written[p].second));
    if (other_id != module_id || !nvcc::same_stub(other_stub, stub))
      return Error::failed(
          cat(name,
              ": nvcc's device passes for different archs disagree on the host stub or module id; "
              "this file cannot be compiled per arch"));
  }
  return write_file_atomic(assembly_file, assembly);
}

// Puts the stub and module id a device pass (`from`) wrote where the host part reads them, with
// the reference to the fat binary the stub includes.
Expected<void> stage_host_inputs(const nvcc::DevicePart& from, const nvcc::HostPart& hp,
                                 const std::string& reference) {
  KILN_TRY(std::string module_id, read_file(from.module_id));
  KILN_TRY(std::string stub, read_file(from.stub));
  if (stub.find(cat("#include \"", hp.fatbin_source.filename().string(), "\"")) ==
      std::string::npos)
    return Error::failed(
        cat(from.stub.string(), " does not include ", hp.fatbin_source.filename().string()));
  KILN_CHECK(write_file_atomic(hp.module_id, module_id));
  KILN_CHECK(write_file_atomic(hp.stub, nvcc::moved_stub(stub, from.stub, hp.stub)));
  KILN_CHECK(write_file_atomic(hp.fatbin_source, reference));
  // The sandbox's, as if its own jobs had written them (fatbinary writes over the reference).
  for (const auto& file : {hp.module_id, hp.stub, hp.fatbin_source})
    KILN_CHECK(TreeLoan::lend_file(file));
  return {};
}

// What a job's gate restores from the object cache: an object (`files` its one path) or a device
// part's files, under the key `key` gives then.
struct Restore {
  ObjectCache* cache = nullptr;
  KeyOf key;
  std::vector<fs::path> files;
  bool device_part = false;
  std::function<void(const Keyed&)> restored;  // what the unit learns of the key (device parts)
};

// The one place a job's output comes from the object cache (the plan's hit, or another worker's
// output where the cache grants leases), when its gate is asked: false when the entry is not
// there, or damaged (never used; the job then runs). The files are the sandbox's, as its job's.
bool restore(const Restore& r) {
  auto keyed = r.key();
  if (!keyed) return false;
  const bool ok = r.device_part ? r.cache->restore_device_part(keyed->key, r.files)
                                : r.cache->restore_object(keyed->key, r.files.front());
  for (const auto& file : r.files) (void)TreeLoan::lend_file(file);
  if (ok && r.restored) r.restored(*keyed);
  return ok;
}

class Planner {
 public:
  Planner(PlanInput input, ObjectCache& cache);
  JobGraph plan() &&;

 private:
  void plan_cxx(Unit& u);
  void plan_whole_file(Unit& u, const std::string& why_not);
  void plan_split(Unit& u, const SplitUnit& su, const SplitCommands& c);
  Expected<SplitCommands> split_commands(const Unit& u, const SplitUnit& su) const;
  // The device jobs a split unit needs (an index per arch, none where no job needs it; a part
  // the cache holds is a restore job); `lowest_cached` says whether the lowest arch's part is.
  std::vector<std::optional<std::size_t>> plan_devices(const Unit& u, const SplitUnit& su,
                                                       const SplitCommands& c,
                                                       const std::shared_ptr<UnitKeys>& keys,
                                                       bool host_hit, bool fatbin_hit,
                                                       bool& lowest_cached);
  std::size_t plan_host(const Unit& u, const SplitUnit& su, const SplitCommands& c,
                        const std::shared_ptr<UnitKeys>& keys, const std::optional<Keyed>& hit,
                        std::optional<std::size_t> lowest_device, bool lowest_cached);
  void plan_fatbin(const Unit& u, const SplitUnit& su, const SplitCommands& c,
                   const std::shared_ptr<UnitKeys>& keys,
                   const std::vector<std::optional<std::size_t>>& device_jobs, std::size_t host_job,
                   bool hit);
  void plan_links();

  // Adds a job; a job whose output `links` links into its extension's module.
  std::size_t add(Job job, JobClass job_class, double estimate, const Unit* links);
  Job unit_job(const Unit& u, std::string label, const nvcc::Env& env,
               const std::string& log_suffix) const;
  Job steps_job(const Unit& u, std::string label, const Steps& steps, const SplitCommands& c,
                const std::string& log_suffix, double memory_gib) const;
  std::string object_key(std::string_view kind, const std::string& commands) const;
  fs::path depfile(const Unit& u, const std::string& part) const;
  // The content key of the job with `command_key` when a recorded dependency set matches and
  // the cache holds its object (a hit: the job restores it), else nullopt. Reads only.
  std::optional<Keyed> hit(const std::string& command_key, const std::string& label) const;
  // Its key when the job's gate restores: the plan's hit, else what the manifests say then.
  KeyOf key_of(const std::string& command_key, std::optional<Keyed> planned) const;
  // Records what the job read (its dependency file) and stores its object under that key.
  std::function<Expected<void>()> store_keyed(const std::string& command_key,
                                              const fs::path& depfile,
                                              const fs::path& object) const;
  // The gate of a job whose output the cache may hold, on a hit of the plan or where the cache
  // grants leases: Done once `restore` put the output in place, else the job runs (with leases,
  // only while this worker holds `command_key`'s; "": no lease). A job that is a restore alone
  // (`fallback` false: what would make its output was not planned) stops the run when the entry
  // is gone (evicted or damaged since the plan), and the graph is marked stale: plan again.
  void gate(Job& job, const std::string& command_key, Restore restore, bool hit,
            bool fallback) const;
  // A unit's job that makes its one object, stored under `command_key`'s content key when it
  // runs: a restore job (`planned`, the plan's hit), else one of `job_class`.
  void add_object_job(Job job, Unit& u, const std::string& command_key, const fs::path& depfile,
                      const std::optional<Keyed>& planned, JobClass job_class, double estimate);
  // A job that only restores `object`, under the key `key` gives.
  void restore_only(const Unit& u, std::string label, KeyOf key, const fs::path& object);
  Steps in_pid_namespace(Steps steps) const;
  double unit_estimate(const Unit& u) const { return u.source_bytes * u.share; }

  PlanInput in_;
  const NativeContext& ctx_;
  ObjectCache& cache_;
  std::shared_ptr<ContentKeys> keys_;  // shared with the jobs, which record what they read
  JobGraph graph_;
  std::vector<std::vector<std::size_t>> ext_deps_;  // per extension, the jobs its link waits for
  std::vector<std::string> arch_tokens_;            // "sm_90", "sm_120+ptx"
  std::string archs_label_;                         // "sm_90,sm_120"
  bool front_end_jobs_ = false;
  const nvcc::Env env_ = {{"SOURCE_DATE_EPOCH", std::to_string(kZipEpoch)}, {"LC_ALL", "C"}};
};

Planner::Planner(PlanInput input, ObjectCache& cache)
    : in_(std::move(input)),
      ctx_(*in_.ctx),
      cache_(cache),
      keys_(std::make_shared<ContentKeys>(cache, ctx_.root / "src")) {
  ext_deps_.resize(ctx_.manifest->extensions.size());
  for (const auto& one : ctx_.archs.each()) arch_tokens_.push_back(one.canonical());
  for (const auto& a : ctx_.archs.archs())
    archs_label_ += cat(archs_label_.empty() ? "" : ",", a.sm_name());
  // A host part needs its file's stub and module id, which the lowest arch's device pass
  // writes. With fewer device parts than slots, slots would idle while the device parts run:
  // the host parts then get the stub from a front-end job of their own (a few seconds), and run
  // beside them; otherwise each waits for its file's lowest arch, and the slots stay busy with
  // devices.
  std::size_t cuda_units = 0;
  for (const auto& u : in_.units) cuda_units += u.source.ends_with(".cu");
  front_end_jobs_ = cuda_units * arch_tokens_.size() < static_cast<std::size_t>(in_.slots);
}

std::size_t Planner::add(Job job, JobClass job_class, double estimate, const Unit* links) {
  const std::size_t index = graph_.jobs.size();
  if (links)
    ext_deps_[static_cast<std::size_t>(links->ext - ctx_.manifest->extensions.data())].push_back(
        index);
  graph_.jobs.push_back({std::move(job), job_class, estimate});
  return index;
}

// A job of one unit: its label, environment, directory and log.
Job Planner::unit_job(const Unit& u, std::string label, const nvcc::Env& env,
                      const std::string& log_suffix) const {
  Job job;
  job.label = std::move(label);
  job.unit = u.name;
  job.env = env;
  job.cwd = ctx_.root / "src";
  job.log = ctx_.root / "logs" / (u.ext->name + "." + u.tag + log_suffix);
  return job;
}

// A job running nvcc's steps for a split unit, one after another.
Job Planner::steps_job(const Unit& u, std::string label, const Steps& steps, const SplitCommands& c,
                       const std::string& log_suffix, double memory_gib) const {
  Job job = unit_job(u, std::move(label), c.env, log_suffix);
  job.argv = steps.front();
  job.then.assign(steps.begin() + 1, steps.end());
  job.memory_gib = memory_gib;
  return job;
}

std::string Planner::object_key(std::string_view kind, const std::string& commands) const {
  return sha256_hex(cat(ctx_.object_salt, "\n", kind, "\n", commands));
}

// Where a job's compiler writes the files it read (`gcc -MD`), apart from its intermediates.
fs::path Planner::depfile(const Unit& u, const std::string& part) const {
  return ctx_.root / "deps" / cat(u.ext->name, ".", u.tag, part, ".d");
}

std::optional<Keyed> Planner::hit(const std::string& command_key, const std::string& label) const {
  auto keyed = keys_->probe(command_key, label);
  if (keyed && cache_.has_object(keyed->key)) return keyed;
  return std::nullopt;
}

KeyOf Planner::key_of(const std::string& command_key, std::optional<Keyed> planned) const {
  return [content = keys_, command_key, planned = std::move(planned)]() {
    return planned ? planned : content->lookup(command_key, "");
  };
}

namespace {
// A job whose dependencies cannot be read is not cached (a warning says why); the build goes on.
void not_cached(const fs::path& what, const Error& why) {
  log::warn(cat(what.filename().string(), ": not cached: ", why.message));
}
}  // namespace

std::function<Expected<void>()> Planner::store_keyed(const std::string& command_key,
                                                     const fs::path& depfile,
                                                     const fs::path& object) const {
  return [keys = keys_, cache = &cache_, command_key, depfile, object]() -> Expected<void> {
    auto keyed = keys->record(command_key, {depfile});
    if (!keyed) {
      not_cached(object, keyed.error());
      return {};
    }
    return cache->store_object(keyed->key, object);
  };
}

Steps Planner::in_pid_namespace(Steps steps) const {
  for (auto& s : steps) s.insert(s.begin(), in_.pid_prefix.begin(), in_.pid_prefix.end());
  return steps;
}

void Planner::gate(Job& job, const std::string& command_key, Restore restore, bool hit,
                   bool fallback) const {
  const bool leases = !command_key.empty() && cache_.has_leases();
  if (!hit && !leases) return;
  auto waited = std::make_shared<bool>(false);
  job.gate = [cache = &cache_, command_key, restore = std::move(restore), leases, fallback,
              label = job.label, stale = graph_.stale, waited]() -> Expected<Gate> {
    if (compile::restore(restore)) return Gate::Done;
    if (!fallback) {
      *stale = true;
      return Error::failed(cat(label, ": its object left the object cache after planning"));
    }
    if (!leases || cache->take_lease(command_key)) return Gate::Run;
    if (!std::exchange(*waited, true)) cache->count_wait();
    return Gate::Wait;
  };
  if (leases) job.finally = [cache = &cache_, command_key] { cache->release_lease(command_key); };
}

void Planner::restore_only(const Unit& u, std::string label, KeyOf key, const fs::path& object) {
  Job job;
  job.label = std::move(label);
  job.unit = u.name;
  job.outputs = {object};
  gate(job, "", Restore{&cache_, std::move(key), {object}}, true, false);
  add(std::move(job), JobClass::Restore, 0, &u);
}

JobGraph Planner::plan() && {
  graph_.directories.push_back(ctx_.root / "deps");
  for (std::size_t i = 0; i < in_.units.size(); ++i) {
    Unit& u = in_.units[i];
    if (!u.source.ends_with(".cu")) {
      plan_cxx(u);
      continue;
    }
    std::string why_not = "nvcc --list-gpu-arch said nothing";
    if (!in_.arch_list.empty()) {
      const std::size_t first = i < in_.dry_runs.first.size() ? in_.dry_runs.first[i] : 0;
      auto su = first + arch_tokens_.size() + 3 <= in_.dry_outputs.size()
                    ? split_unit(&in_.dry_outputs[first], arch_tokens_, in_.arch_list)
                    : Expected<SplitUnit>(Error::failed("no dry run"));
      auto commands = su ? split_commands(u, *su) : Expected<SplitCommands>(su.error());
      if (commands) {
        plan_split(u, *su, *commands);
        continue;
      }
      why_not = commands.error().message;
    }
    plan_whole_file(u, why_not);
  }
  plan_links();
  return std::move(graph_);
}

void Planner::plan_cxx(Unit& u) {
  const std::string source = (ctx_.root / "src" / u.source).string();
  std::vector<std::string> argv =
      cxx_compile_argv(ctx_, *u.ext, u.defines, source, u.object.string());
  const fs::path dep = depfile(u, "");
  append(argv, {"-MD", "-MF", dep.string()});
  const std::string key = object_key("cxx", join(argv, "\x1f"));
  const std::string label = cat(fs::path(ctx_.cxx.path).filename().string(), " ", u.name);
  const auto planned = hit(key, label);
  Job job = unit_job(u, label, env_, ".log");
  job.argv = std::move(argv);
  job.memory_gib = 2.0;
  add_object_job(std::move(job), u, key, dep, planned, JobClass::HostCxx, unit_estimate(u));
}

void Planner::add_object_job(Job job, Unit& u, const std::string& command_key,
                             const fs::path& depfile, const std::optional<Keyed>& planned,
                             JobClass job_class, double estimate) {
  job.outputs = {u.object};
  job.on_success = store_keyed(command_key, depfile, u.object);
  gate(job, command_key, Restore{&cache_, key_of(command_key, planned), {u.object}},
       planned.has_value(), true);
  if (planned)
    add(std::move(job), JobClass::Restore, 0, &u);
  else
    add(std::move(job), job_class, estimate, &u);
}

void Planner::plan_whole_file(Unit& u, const std::string& why_not) {
  log::verbose(cat(u.name, ": one nvcc for all archs (", why_not, ")"));
  const int threads = static_cast<int>(std::clamp<std::size_t>(
      ctx_.archs.gencode_flags().size(), 1, static_cast<std::size_t>(in_.slots)));
  const fs::path keep = keep_dir(ctx_, u) / "all";
  const std::string source = (ctx_.root / "src" / u.source).string();
  std::vector<std::string> argv = nvcc_compile_argv(
      ctx_, *u.ext, u.defines, source, u.object.string(), threads, keep.string(), in_.pid_prefix);
  const fs::path dep = depfile(u, "");
  append(argv, {"-MD", "-MF", dep.string()});
  const std::string key = object_key("nvcc", join(argv, "\x1f"));
  const auto planned = hit(key, cat("nvcc ", u.name, " ", archs_label_));
  graph_.directories.push_back(keep);
  Job job = unit_job(u, cat("nvcc ", u.name, " ", archs_label_), env_, ".log");
  job.arch = archs_label_;
  job.argv = std::move(argv);
  job.weight = threads;
  job.memory_gib = 1.0 + 2.5 * u.share * threads;
  add_object_job(std::move(job), u, key, dep, planned,
                 u.sharded ? JobClass::ShardedDevice : JobClass::Device,
                 unit_estimate(u) * static_cast<double>(arch_tokens_.size()));
}

Expected<SplitCommands> Planner::split_commands(const Unit& u, const SplitUnit& su) const {
  SplitCommands c;
  c.env = env_;
  for (const auto& [name, value] : su.env)
    if (name != "SOURCE_DATE_EPOCH" && name != "LC_ALL") c.env.emplace_back(name, value);
  // Each pass's preprocessing writes what it read: its content key's dependencies.
  auto with_depfile = [&](Steps steps, const fs::path& dep) -> Expected<Steps> {
    if (!add_depfile(steps, dep))
      return Error::failed("a pass of nvcc's dry run has no preprocessing step");
    return in_pid_namespace(std::move(steps));
  };
  for (std::size_t a = 0; a < su.devices.size(); ++a) {
    c.device_depfiles.push_back(depfile(u, cat(".", arch_dir(su.device_labels[a]))));
    KILN_TRY(Steps steps, with_depfile(su.devices[a].steps, c.device_depfiles.back()));
    c.device_steps.push_back(std::move(steps));
    c.device_keys.push_back(object_key("nvcc-device", join_commands(c.device_steps.back())));
  }
  c.front_depfile = depfile(u, ".front");
  c.host_depfile = depfile(u, ".host");
  KILN_TRY(c.front_steps, with_depfile(su.front.steps, c.front_depfile));
  KILN_TRY(c.host_steps, with_depfile(su.host.steps, c.host_depfile));
  // The host object refers to its fat binary by a symbol, hidden in the module, that the fat
  // binary's object defines.
  const std::string symbol =
      "__kiln_fatbin_" + sha256_hex(cat(u.ext->name, "/", u.tag)).substr(0, 16);
  c.reference = nvcc::fatbin_reference(symbol);
  c.assembly = nvcc::fatbin_assembly(symbol, su.host.fatbin);
  c.assembly_file = su.host.fatbin.parent_path() / "fatbin.s";
  c.fatbinary = in_pid_namespace({su.host.fatbinary}).front();
  c.assemble = {ctx_.cxx.path, "-c", c.assembly_file.string(), "-o",
                fatbin_object(ctx_, u).string()};
  // The host part depends on the device parts only through the stub and module id, which the
  // front end's commands determine (wherever they are taken from); the fat binary on all.
  c.host_key = object_key("nvcc-host", cat(join_commands(c.host_steps), "\n", c.reference, "\n",
                                           join_commands(c.front_steps)));
  c.fatbin_key =
      object_key("nvcc-fatbin", cat(join_commands({c.fatbinary, c.assemble}), "\n", c.assembly));
  return c;
}

void Planner::plan_split(Unit& u, const SplitUnit& su, const SplitCommands& c) {
  u.fatbin_object = fatbin_object(ctx_, u);
  auto keys = std::make_shared<UnitKeys>();
  for (std::size_t a = 0; a < su.devices.size(); ++a) {
    auto keyed = keys_->probe(c.device_keys[a], cat("nvcc ", u.name, " ", su.device_labels[a]));
    keys->devices.push_back(keyed ? std::optional(keyed->key) : std::nullopt);
    if (a == 0 && keyed) keys->stub = std::move(keyed->deps);
  }
  const auto host = hit(c.host_key, cat("nvcc ", u.name, " host"));
  const auto fatbin_key = fatbin_content_key(c.fatbin_key, *keys);
  const bool fatbin_hit = fatbin_key && cache_.has_object(*fatbin_key);
  if (host && fatbin_hit) {  // both restored: the unit needs no device part
    restore_only(u, cat("nvcc ", u.name, " host"), key_of(c.host_key, host), u.object);
    restore_only(u, cat("fatbinary ", u.name, " ", archs_label_), fatbin_key_of(c.fatbin_key, keys),
                 u.fatbin_object);
    return;
  }
  bool lowest_cached = false;
  const auto device_jobs =
      plan_devices(u, su, c, keys, host.has_value(), fatbin_hit, lowest_cached);
  const std::size_t host_job = plan_host(u, su, c, keys, host, device_jobs.front(), lowest_cached);
  plan_fatbin(u, su, c, keys, device_jobs, host_job, fatbin_hit);
}

namespace {
// Records what arch `a`'s device pass read and stores its files under that key, then removes the
// rest of nvcc's intermediates in its directory (preprocessed sources, PTX not shipped).
std::function<Expected<void>()> store_device_part(ObjectCache& cache,
                                                  std::shared_ptr<ContentKeys> content,
                                                  std::shared_ptr<UnitKeys> keys, std::size_t a,
                                                  const std::string& command_key,
                                                  const fs::path& depfile,
                                                  const std::vector<fs::path>& outputs) {
  return [cache = &cache, content, keys, a, command_key, depfile, outputs]() -> Expected<void> {
    auto keyed = content->record(command_key, {depfile});
    if (keyed) {
      keys->devices[a] = keyed->key;
      if (a == 0 && !keys->stub) keys->stub = keyed->deps;
      KILN_CHECK(cache->store_device_part(keyed->key, outputs));
    } else {
      not_cached(outputs.back(), keyed.error());
    }
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(outputs.front().parent_path(), ec))
      if (std::find(outputs.begin(), outputs.end(), entry.path()) == outputs.end())
        fs::remove(entry.path(), ec);
    return {};
  };
}
}  // namespace

namespace {
// Arch `a`'s device part as its gate restores it: under the key the plan found (a hit), else the
// one its manifest gives then (another worker's); the unit learns the key.
Restore device_restore(ObjectCache& cache, std::shared_ptr<ContentKeys> content,
                       std::shared_ptr<UnitKeys> keys, std::size_t a,
                       const std::string& command_key, const std::vector<fs::path>& outputs) {
  Restore r{&cache, {}, outputs, true, {}};
  r.key = [content, keys, a, command_key]() -> std::optional<Keyed> {
    if (keys->devices[a]) return Keyed{*keys->devices[a], {}};
    return content->lookup(command_key, "");
  };
  r.restored = [keys, a](const Keyed& keyed) {
    keys->devices[a] = keyed.key;
    if (a == 0 && !keys->stub) keys->stub = keyed.deps;
  };
  return r;
}
}  // namespace

std::vector<std::optional<std::size_t>> Planner::plan_devices(const Unit& u, const SplitUnit& su,
                                                              const SplitCommands& c,
                                                              const std::shared_ptr<UnitKeys>& keys,
                                                              bool host_hit, bool fatbin_hit,
                                                              bool& lowest_cached) {
  // All for the fat binary; the lowest arch's for the stub (unless a front end writes it).
  std::vector<std::optional<std::size_t>> jobs(su.devices.size());
  for (std::size_t a = 0; a < su.devices.size(); ++a) {
    const nvcc::DevicePart& d = su.devices[a];
    const bool for_fatbin = !fatbin_hit, for_stub = a == 0 && !host_hit;
    if (!for_fatbin && !for_stub) continue;
    std::vector<fs::path> outputs = {d.module_id, d.stub};
    for (const auto& im : d.images) outputs.push_back(im.file);
    // A cached device part: a job restores its files where the host part and the fat binary read
    // them (or, when the entry is gone by then, makes them).
    const bool hit = keys->devices[a] && cache_.has_device_part(*keys->devices[a], outputs);
    lowest_cached = lowest_cached || (hit && a == 0);
    if (!hit && !for_fatbin && front_end_jobs_) continue;  // the front-end job writes the stub
    Job job = steps_job(u, cat("nvcc ", u.name, " ", su.device_labels[a]), c.device_steps[a], c,
                        cat(".", arch_dir(su.device_labels[a]), ".log"), 0.5 + 2.5 * u.share);
    job.arch = su.device_labels[a];
    job.outputs = outputs;
    job.on_success =
        store_device_part(cache_, keys_, keys, a, c.device_keys[a], c.device_depfiles[a], outputs);
    gate(job, c.device_keys[a], device_restore(cache_, keys_, keys, a, c.device_keys[a], outputs),
         hit, true);
    jobs[a] = hit ? add(std::move(job), JobClass::Restore, 0, nullptr)
                  : add(std::move(job), u.sharded ? JobClass::ShardedDevice : JobClass::Device,
                        unit_estimate(u), nullptr);
  }
  return jobs;
}

std::size_t Planner::plan_host(const Unit& u, const SplitUnit& su, const SplitCommands& c,
                               const std::shared_ptr<UnitKeys>& keys,
                               const std::optional<Keyed>& hit,
                               std::optional<std::size_t> lowest_device, bool lowest_cached) {
  // The stub and module id: from the lowest arch's device part when it is cached (or when the
  // host part is: the fat binary needs that part), from a front-end job, or from that part's job.
  const nvcc::DevicePart* from = &su.devices.front();
  std::optional<std::size_t> dep = lowest_device;
  if (!hit && !lowest_cached && front_end_jobs_) {
    from = &su.front;
    Job front = steps_job(u, cat("nvcc ", u.name, " front end"), c.front_steps, c, ".front.log",
                          0.5 + 0.5 * u.share);
    front.outputs = {su.front.module_id, su.front.stub};
    front.on_success = [content = keys_, keys, depfile = c.front_depfile]() -> Expected<void> {
      auto deps = content->read(depfile);
      if (deps && !keys->stub) keys->stub = std::move(*deps);
      return {};
    };
    dep = add(std::move(front), JobClass::FrontEnd, unit_estimate(u), nullptr);
  }
  Job host = steps_job(u, cat("nvcc ", u.name, " host"), c.host_steps, c, ".host.log", 1.0);
  if (dep) host.deps = {*dep};
  host.before = [from = *from, hp = su.host, reference = c.reference, keys]() -> Expected<void> {
    KILN_CHECK(stage_host_inputs(from, hp, reference));
    keys->host_staged = true;
    return {};
  };
  gate(host, c.host_key, Restore{&cache_, key_of(c.host_key, hit), {u.object}}, hit.has_value(),
       dep.has_value());
  host.outputs = {u.object};
  // What the host part read: its own preprocessing's files and those of the pass its stub and
  // module id come from.
  host.on_success = [content = keys_, cache = &cache_, keys, command_key = c.host_key,
                     depfile = c.host_depfile, object = u.object]() -> Expected<void> {
    auto keyed = keys->stub ? content->record(command_key, {depfile}, *keys->stub)
                            : Expected<Keyed>(Error::failed("its stub's dependencies are unknown"));
    if (!keyed) {
      not_cached(object, keyed.error());
      return {};
    }
    return cache->store_object(keyed->key, object);
  };
  if (hit) return add(std::move(host), JobClass::Restore, 0, &u);
  return add(std::move(host), JobClass::HostOrFatBinary, unit_estimate(u), &u);
}

void Planner::plan_fatbin(const Unit& u, const SplitUnit& su, const SplitCommands& c,
                          const std::shared_ptr<UnitKeys>& keys,
                          const std::vector<std::optional<std::size_t>>& device_jobs,
                          std::size_t host_job, bool hit) {
  const std::string label = cat("fatbinary ", u.name, " ", archs_label_);
  const bool every_part = std::all_of(device_jobs.begin(), device_jobs.end(),
                                      [](const auto& j) { return j.has_value(); });
  if (hit && !every_part) {  // only the stub's part is planned: nothing else could make it
    restore_only(u, label, fatbin_key_of(c.fatbin_key, keys), u.fatbin_object);
    return;
  }
  Job fat = steps_job(u, label, {c.fatbinary, c.assemble}, c, ".fatbin.log", 1.0);
  fat.arch = archs_label_;
  for (const auto& j : device_jobs)
    if (j) fat.deps.push_back(*j);
  fat.deps.push_back(host_job);
  // Every arch's pass must have written the same module id and stub (they name the file's
  // entities, which the host part refers to), up to the numbering of the stub's temporaries; so
  // must the pass the host part took them from, when it ran in this build.
  Written written;
  for (const auto& d : su.devices) written.emplace_back(d.module_id, d.stub);
  // The host part's pass too, when its job ran here (not when another worker's was restored).
  fat.before = [name = u.name, written, host = su.host, keys, assembly = c.assembly,
                file = c.assembly_file]() mutable {
    if (keys->host_staged) written.emplace_back(host.module_id, host.stub);
    return check_passes_agree(name, written, assembly, file);
  };
  fat.outputs = {u.fatbin_object};
  fat.on_success = [cache = &cache_, keys, command_key = c.fatbin_key,
                    object = u.fatbin_object]() -> Expected<void> {
    auto key = fatbin_content_key(command_key, *keys);
    if (!key) {
      not_cached(object, Error::failed("a device part's key is unknown"));
      return {};
    }
    return cache->store_object(*key, object);
  };
  gate(fat, "", Restore{&cache_, fatbin_key_of(c.fatbin_key, keys), {u.fatbin_object}}, hit, true);
  if (hit)
    add(std::move(fat), JobClass::Restore, 0, &u);
  else
    add(std::move(fat), JobClass::HostOrFatBinary, unit_estimate(u), &u);
}

// Each module from its units' objects, in the manifest's order.
void Planner::plan_links() {
  const auto& extensions = ctx_.manifest->extensions;
  for (std::size_t e = 0; e < extensions.size(); ++e) {
    const manifest::Extension& ext = extensions[e];
    std::vector<std::string> objects;
    for (const auto& u : in_.units) {
      if (u.ext != &ext) continue;
      objects.push_back(u.object.string());
      if (!u.fatbin_object.empty()) objects.push_back(u.fatbin_object.string());
    }
    const std::string rel = module_path(ext.name, ctx_.python.ext_suffix);
    const fs::path out = ctx_.root / "out" / rel;
    graph_.directories.push_back(out.parent_path());
    Job link;
    link.label = cat("link ", fs::path(rel).filename().string());
    link.argv = link_argv(ctx_, ext, objects, out.string());
    link.env = {{"LC_ALL", "C"}};
    link.cwd = ctx_.root / "src";
    link.log = ctx_.root / "logs" / (ext.name + ".link.log");
    link.memory_gib = 1;
    link.deps = ext_deps_[e];
    link.outputs = {out};
    graph_.jobs.push_back({std::move(link), JobClass::Link, 0});
    graph_.modules.push_back(BuiltModule{rel, out});
  }
}

}  // namespace

JobGraph plan_jobs(PlanInput input, ObjectCache& cache) {
  return Planner(std::move(input), cache).plan();
}

namespace {

// The runner starts ready jobs in this order: host parts and fat binaries as soon as they can
// (they unblock links), then the device parts (or one nvcc for all archs), longest chain first:
// a source's parts with the host part after them, started later, leave the other slots idle at
// the end (measured on 2 cores: 197 s with host C++ first); then host C++, then the front ends
// (a few seconds each: they fill the slots the device parts leave), then the links.
int rank_of(JobClass c) {
  switch (c) {
    case JobClass::Restore:
      return 0;
    case JobClass::HostOrFatBinary:
      return 1;
    case JobClass::ShardedDevice:
    case JobClass::Device:
      return 2;
    case JobClass::HostCxx:
      return 3;
    case JobClass::FrontEnd:
      return 4;
    case JobClass::Link:
      return 5;
  }
  return 5;
}

}  // namespace

std::vector<Job> schedule(JobGraph graph) {
  std::vector<Job> jobs;
  jobs.reserve(graph.jobs.size());
  for (auto& planned : graph.jobs) {
    planned.job.job_class = static_cast<int>(planned.job_class);
    planned.job.rank = rank_of(planned.job_class);
    planned.job.estimate = planned.estimate;
    jobs.push_back(std::move(planned.job));
  }
  return pool_order(std::move(jobs));
}

}  // namespace kiln::compile
