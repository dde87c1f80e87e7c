#include "pipeline/pipeline.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "attest/dsse.h"
#include "attest/wheel.h"
#include "cache/build_root.h"
#include "cache/store.h"
#include "compile/backend.h"
#include "compile/sandbox.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/interrupt.h"
#include "core/lock.h"
#include "core/log.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "elf/elf.h"
#include "manifest/backend.h"
#include "packaging/name.h"
#include "pipeline/pins.h"
#include "pipeline/sources.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/toolchain.h"
#include "toolchain/torch.h"
#include "validate/validate.h"
#include "wheel/metadata.h"
#include "wheel/provenance.h"
#include "wheel/reader.h"
#include "wheel/tags.h"
#include "wheel/upstream.h"
#include "wheel/writer.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif

namespace kiln::pipeline {

static_assert(cache::kMaxAttestationBytes == attest::kMaxAttestationBytes,
              "the cache keeps every attestation attest writes");

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

void flatten(const json& j, const std::string& path, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else {
    out[path] = j.dump();
  }
}

// The target's pinned torch wheel for its Python, fetched and unpacked into a sysroot.
Expected<void> fetch_torch(const resolve::ResolvedTarget& rt, Fetching& fetching,
                           const cache::Store& store, toolchain::Toolchain& tc) {
  KILN_TRY(manifest::TorchWheel wheel, torch_wheel_for(rt.target, tc.python.abi_tag));
  KILN_TRY(fetch::Fetched got, fetch_pinned(fetching, {"torch", wheel.file, wheel.sha256, "",
                                                       rt.target.torch_index_url}));
  KILN_TRY(tc.torch, toolchain::torch_from_wheel(got.path, wheel.sha256, store));
  tc.torch_wheel = got.path;
  return {};
}

using toolchain::Toolchain;

// The target's toolchain from what resolve probed; a toolkit of pinned wheels is laid out and a
// pinned torch wheel fetched and unpacked here, when a build first needs them.
Expected<Toolchain> prepare_toolchain(const resolve::ResolvedTarget& rt, Fetching& fetching,
                                      const cache::Store& store) {
  const auto& target = rt.target;
  if (!rt.python || !rt.cxx)
    return Error::failed(cat("target ", target.name, " was resolved without its toolchain"));
  Toolchain tc;
  tc.python = *rt.python;
  tc.cxx = *rt.cxx;
  if (rt.cuda) {
    tc.cuda = *rt.cuda;
  } else {
    // The toolkit's files as pinned_files lists them for `kiln fetch --target`.
    auto fetch_wheel = [&fetching, &target](const std::string& file,
                                            const std::string& sha256) -> Expected<fs::path> {
      KILN_TRY(fetch::Fetched got, fetch_pinned(fetching, cuda_pin(target, file, sha256)));
      return got.path;
    };
    auto cuda = toolchain::make_cuda_source(resolve::cuda_request(target), &store, fetch_wheel);
    KILN_TRY(tc.cuda, cuda->toolkit());
    // The system toolkit's range was checked by resolve; this one is known now it is laid out.
    KILN_CHECK(toolchain::check_host_compiler(tc.cuda, tc.cxx));
  }
  if (rt.torch) {
    tc.torch = *rt.torch;
  } else {
    KILN_CHECK(fetch_torch(rt, fetching, store, tc));
  }
  if (!tc.torch.cuda.empty())
    KILN_CHECK(
        toolchain::check_cuda_matches(tc.cuda, tc.torch.cuda, cat("torch ", tc.torch.version)));
  KILN_TRY(tc.host, toolchain::probe_host_facts(tc.cxx, tc.cuda));
  return tc;
}

// The long description: the manifest's readme, else the sdist's PKG-INFO body.
void add_description(const manifest::Manifest& m, const fs::path& src, wheel::CoreMetadata& md) {
  constexpr std::uint64_t kMaxDescription = 16u << 20;
  if (!m.readme.empty()) {
    auto text = read_file(src / m.readme, kMaxDescription);
    if (!text) {
      log::warn(cat(m.name, ": no long description: ", text.error().message));
      return;
    }
    md.description = *text;
    std::string ext = fs::path(m.readme).extension().string();
    md.description_content_type = ext == ".md"    ? "text/markdown"
                                  : ext == ".rst" ? "text/x-rst"
                                                  : "text/plain";
    return;
  }
  auto text = read_file(src / "PKG-INFO", kMaxDescription);
  if (!text) return;
  auto parsed = wheel::parse_metadata(*text);
  md.description = parsed.body;
  md.description_content_type = parsed.first("Description-Content-Type");
}

Expected<std::vector<wheel::WheelEntry>> license_entries(const manifest::Manifest& m,
                                                         const fs::path& src) {
  std::vector<wheel::WheelEntry> out;
  std::error_code ec;
  const fs::path top = fs::canonical(src, ec);
  for (const auto& f : m.license_files) {
    // Streamed from the file itself (a link in the tree is followed, but only inside it).
    const fs::path file = fs::weakly_canonical(src / f, ec);
    if (ec || !path_within(file, top) || !fs::is_regular_file(file, ec))
      return Error::failed(cat("license file ", f, " is not in the source tree of ", m.name));
    wheel::WheelEntry entry;
    entry.path = f;
    entry.source = file;
    out.push_back(std::move(entry));
  }
  return out;
}

// The provenance's record of the torch a wheel was built against: TorchSysroot::identity().
wheel::BuiltTorch built_torch(const toolchain::TorchSysroot& t) {
  return {t.version, t.cuda, t.cxx11_abi, t.abi_flags(), t.identity_sha256};
}

// What compiled wheels share, whichever backend built their modules: version with the local
// label, tags (manylinux from the ELF files), the torch pin, provenance.
Expected<void> finish_compiled(const manifest::Manifest& m, const resolve::ResolvedTarget& rt,
                               const Toolchain& tc, const std::vector<elf::ElfInfo>& elves,
                               const std::vector<std::string>& modules, wheel::WheelSpec& spec,
                               wheel::Provenance& provenance) {
  KILN_TRY(wheel::PlatformTag needed, wheel::manylinux_tag(elves));
  auto floored = wheel::at_floor(needed, rt.manylinux,
                                 wheel::symbols_above_floor(elves, modules, rt.manylinux));
  if (!floored)
    return Error::failed(cat(m.name, " for target ", rt.target.name, ": ", floored.error().message),
                         floored.error().detail);
  const wheel::PlatformTag& platform = *floored;
  spec.version = cat(m.version, "+", wheel::local_label(rt.target.cuda_version, tc.torch.version));
  spec.tag = cat(tc.python.python_tag, "-", tc.python.abi_tag, "-", platform.tag);
  spec.metadata.requires_dist =
      wheel::pin_torch(spec.metadata.requires_dist, rt.target.torch_minor(), true);
  provenance.archs = rt.target.archs.canonical();
  provenance.tools = wheel::BuiltTools{
      tc.cuda.version_text, tc.cxx.version_text, tc.python.version,   built_torch(tc.torch),
      tc.host.ld,           tc.host.glibc,       tc.host.cuda_include};
  provenance.platform =
      wheel::BuiltPlatform{platform.tag, platform.limiting, platform.highest, platform.needs};
  return {};
}

// The differences between two key-input documents, as "path: old -> new" lines.
std::vector<std::string> explain_changes(const json& before, const json& after) {
  std::map<std::string, std::string> a, b;
  flatten(before, "", a);
  flatten(after, "", b);
  std::vector<std::string> out;
  for (const auto& [k, v] : b) {
    auto it = a.find(k);
    if (it == a.end())
      out.push_back(cat(k, ": (new) -> ", v));
    else if (it->second != v)
      out.push_back(cat(k, ": ", it->second, " -> ", v));
  }
  for (const auto& [k, v] : a)
    if (!b.count(k)) out.push_back(cat(k, ": ", v, " -> (gone)"));
  return out;
}

// What one `run` holds across its items.
struct Run {
  const resolve::Plan& plan;
  const Options& options;
  cache::Store& store;
  Fetching& fetching;
  std::map<std::string, Toolchain> toolchains;  // per target, prepared on first miss
  Result& result;
  const Fresh* fresh = nullptr;  // build_fresh's
  double began = now();
};

const resolve::ResolvedTarget* target_of(const resolve::Plan& plan, const std::string& name) {
  for (const auto& t : plan.targets)
    if (t.target.name == name) return &t;
  return nullptr;
}

// Why an item is built (--explain): what changed since its last build for this target.
std::vector<std::string> explain_miss(const std::optional<cache::LastBuild>& last,
                                      const json& inputs) {
  std::vector<std::string> why;
  if (!last || !last->inputs.is_object())
    why.push_back("no earlier build of this package for this target");
  else
    why = explain_changes(last->inputs, inputs);
  if (why.empty())
    why.push_back("the cache has no entry for this key (removed or never committed)");
  return why;
}

// A build with a --backend override is an experiment: the package's last build for its target
// (what --explain diffs against and what the index serves) stays the manifest's own.
bool backend_overridden(const resolve::Plan& plan, const manifest::Manifest* m) {
  for (const auto& o : plan.overridden)
    if (o.get() == m) return true;
  return false;
}

// Records the item's entry (a hit or a fresh commit) as its package's last build for the target.
Expected<void> record_last(Run& run, const resolve::PlanItem& item, const cache::Entry& entry) {
  if (backend_overridden(run.plan, item.manifest)) return {};
  cache::LastBuild last;
  last.target = item.target_name;
  last.package = item.manifest->normalized_name();
  last.key = item.key;
  last.wheel = entry.wheel.filename().string();
  last.backend = std::string(item.manifest->backend->name);
  last.inputs = item.inputs;
  return run.store.record_last(last);
}

// The wheel's spec before a backend ran: metadata (the manifest's name, summary, license and
// Requires-Python; the sdist's own requirements, extras, classifiers, URLs, people and entry
// points, with the manifest's extra-dependencies) and licenses.
Expected<wheel::WheelSpec> base_spec(const manifest::Manifest& m, const fs::path& src,
                                     const wheel::UpstreamMetadata& upstream) {
  wheel::WheelSpec spec;
  spec.distribution = packaging::file_name_part(m.name);
  spec.metadata.name = m.name;
  spec.metadata.summary = m.summary;
  spec.metadata.home_page = m.homepage;
  spec.metadata.license_expression = m.license;
  spec.metadata.requires_python = m.requires_python;
  spec.metadata.license_files = m.license_files;
  wheel::apply_upstream(upstream, m.extra_dependencies, spec.metadata);
  spec.entry_points = upstream.entry_points;
  add_description(m, src, spec.metadata);
  KILN_TRY(spec.license_files, license_entries(m, src));
  return spec;
}

// Each target's toolchain is prepared once, by the first compiled package that needs it.
Expected<const Toolchain*> toolchain_for(Run& run, const resolve::ResolvedTarget& rt) {
  auto it = run.toolchains.find(rt.target.name);
  if (it == run.toolchains.end()) {
    KILN_TRY(Toolchain prepared, prepare_toolchain(rt, run.fetching, run.store));
    it = run.toolchains.emplace(rt.target.name, std::move(prepared)).first;
  }
  return &it->second;
}

// The backend's request: one fill for every backend.
Expected<compile::BuildRequest> build_request(Run& run, const compile::Backend& backend,
                                              const resolve::PlanItem& item,
                                              const resolve::ResolvedTarget& rt,
                                              const Toolchain* tc,
                                              const cache::BuildRoot& build_root) {
  compile::BuildRequest request;
  request.manifest = item.manifest;
  request.root = build_root.path();
  request.toolchain = tc;
  request.archs = rt.target.archs;
  request.jobs = run.options.jobs;
  request.manylinux = rt.manylinux;
  request.root_lock_fd = build_root.lock_fd();
  request.sandbox = run.options.sandbox;
  request.fresh = run.fresh != nullptr;
  compile::Preparation prep;
  prep.target = &rt.target;
  prep.build_env = &run.plan.build_env;
  prep.store = &run.store;
  prep.shards = item.shards;
  prep.object_salt = item.object_salt;
  prep.fetch = [&run](const manifest::PinnedWheel& w) -> Expected<fs::path> {
    KILN_TRY(fetch::Fetched got, fetch_pinned(run.fetching, {w.project, w.file, w.sha256}));
    return got.path;
  };
  KILN_CHECK(backend.prepare(prep, request));
  return request;
}

// The backend's output into the wheel's spec: its files, and for compiled wheels the version
// with the local label, the tags from the modules' ELF files, the torch pin and provenance.
Expected<void> finish_spec(const resolve::PlanItem& item, const resolve::ResolvedTarget& rt,
                           const Toolchain* tc, compile::BuildOutput built, wheel::WheelSpec& spec,
                           wheel::Provenance& provenance) {
  const manifest::Manifest& m = *item.manifest;
  if (!tc) {
    spec.files = std::move(built.files);
    spec.version = m.version;
    spec.tag = "py3-none-any";
    spec.root_is_purelib = true;
    return {};
  }
  std::vector<elf::ElfInfo> elves;
  std::vector<std::string> modules;
  for (const auto& f : built.files) {
    if (std::find(built.modules.begin(), built.modules.end(), f.path) == built.modules.end())
      continue;
    KILN_TRY(elf::ElfInfo info, elf::read_elf(f.data, f.path));
    elves.push_back(std::move(info));
    modules.push_back(f.path);
  }
  spec.files = std::move(built.files);
  KILN_CHECK(finish_compiled(m, rt, *tc, elves, modules, spec, provenance));
  provenance.setuptools = std::move(built.setuptools);
  return {};
}

// An error that names a log in the build root (a path only kiln's namespace has, removed when the
// item ends) names the copy kept in the cache instead.
Error with_kept_logs(Error e, const fs::path& root, const fs::path& kept, bool root_kept) {
  const std::string from = (root / "logs").string(), to = kept.string();
  bool named = false;
  for (std::string* text : {&e.message, &e.detail})
    for (std::size_t at = text->find(from); at != std::string::npos;
         at = text->find(from, at + to.size())) {
      text->replace(at, from.size(), to);
      named = true;
    }
  if (named && !root_kept)
    e.detail += "\n(the build root is removed after a build; --keep-build-root keeps it)";
  return e;
}

// The static checks of `kiln validate` before anything is committed: a failure fails the build.
Expected<void> check_before_commit(const fs::path& wheel_path, const manifest::Manifest& m,
                                   const resolve::ResolvedTarget* rt, const Toolchain* tc,
                                   const wheel::UpstreamMetadata& upstream) {
  validate::Options checks;
  if (upstream.origin.empty())
    checks.upstream_note = "the sources have no PKG-INFO";
  else
    checks.upstream = upstream;
  if (tc) {
    checks.torch = tc->torch;
    checks.torch_note = cat("target ", rt->target.name);
    checks.archs = rt->target.archs;
    checks.library_dirs = {tc->cuda.home / "lib64", tc->cuda.home / "lib"};
    for (const auto& d : validate::default_library_dirs()) checks.library_dirs.push_back(d);
  }
  KILN_TRY(validate::Report report, validate::validate_wheel(wheel_path, checks));
  std::vector<std::string> failures;
  for (const auto& c : report.checks) {
    if (c.verdict == validate::Verdict::Warn) log::warn(cat(m.name, ": ", c.id, ": ", c.message));
    if (c.verdict == validate::Verdict::Fail) failures.push_back(cat("  ", c.id, ": ", c.message));
  }
  if (!failures.empty())
    return Error::failed(
        cat(m.name, ": the built wheel fails validation: ", failures.front().substr(2)),
        join(failures, "\n"));
  return {};
}

// `text` as an entry.json string may be (a caveat names the cache's path, which may hold any
// byte): control characters shown, valid UTF-8, within the field's bound ("…" is 3 bytes).
std::string entry_text(const std::string& text) {
  return terminal_field(text, cache::kMaxEntryFieldBytes - 3);
}

// What `kiln rebuild` needs that the key's inputs leave out (wheel::RebuildRecipe): where the
// source is, the target's torch index for a compiled package, the applied patches' bytes.
wheel::RebuildRecipe rebuild_recipe(const manifest::Manifest& m, const resolve::ResolvedTarget* rt,
                                    const std::string& kiln_commit,
                                    std::vector<patch::PatchText> applied) {
  wheel::RebuildRecipe r;
  r.kiln_commit = kiln_commit;
  using Kind = manifest::Source::Kind;
  if (m.source.kind == Kind::Url || m.source.kind == Kind::Git) {
    r.source_url = m.source.url;
    r.source_size = m.source.size;
  }
  if (rt && m.backend->compiles) r.torch_index_url = rt->target.torch_index_url;
  for (std::size_t i = 0; i < applied.size() && i < m.patches.size(); ++i)
    r.patches.push_back({m.patches[i].name, m.patches[i].sha256, std::move(applied[i].text)});
  return r;
}

// A wheel built and checked, in a staging directory of the cache (removed with it).
struct Made {
  cache::Staging staging;
  fs::path wheel;
  std::string version;  // with its local label
};

// A miss being built: what its preparation made, held until its wheel is committed or it fails.
struct Building {
  std::size_t index = 0;  // in plan.items
  const resolve::PlanItem* item = nullptr;
  const resolve::ResolvedTarget* rt = nullptr;
  const Toolchain* tc = nullptr;
  std::unique_ptr<compile::Backend> backend;
  std::optional<cache::BuildRoot> root;  // before `planned`: the sandbox's loan ends first
  wheel::UpstreamMetadata upstream;
  wheel::WheelSpec spec;
  wheel::Provenance provenance;
  compile::PlannedBuild planned;
  bool logs_kept = false;
  ItemResult ir;  // its caveats gather the build's
  double started = 0;
  std::optional<Made> made;  // build_fresh's wheel, not committed
};

ItemResult item_result(const resolve::PlanItem& item) {
  const manifest::Manifest& m = *item.manifest;
  return ItemResult{m.name, m.version, item.target_name, item.key, std::string(m.backend->name)};
}

// A record of kiln's own work on a package (its preparation), for the trace.
void record_step(Run& run, const Building& b, std::string label, double began) {
  compile::JobStats::Timing t{std::move(label),
                              now() - began,
                              0,
                              0,
                              began - run.began,
                              0,
                              1,
                              compile::JobStats::Verdict::Step,
                              0};
  run.result.jobs.push_back({std::move(t), b.ir.package, b.ir.version, b.ir.target, "", ""});
}

// Sources, toolchain, metadata and the backend's plan: everything of a miss before its jobs.
Expected<void> start_build(Run& run, Building& b) {
  const double began = now();
  const manifest::Manifest& m = *b.item->manifest;
  KILN_TRY(b.backend, compile::make_backend(*m.backend));
  KILN_CHECK(b.backend->check_archs(b.rt->target.archs));
  if (m.backend->compiles) {
    KILN_TRY(b.tc, toolchain_for(run, *b.rt));
    if (run.fresh && run.fresh->check_toolchain) KILN_CHECK(run.fresh->check_toolchain(*b.tc));
  }
  log::info(cat("building ", m.name, " ", m.version, " for ", b.item->target_name, " (",
                std::string(m.backend->name), ")"));

  // Sources: fetch, unpack or copy, patch — in a build root named after the sources.
  // Removed however this item ends (unless --keep-build-root).
  KILN_TRY(cache::BuildRoot created,
           cache::BuildRoot::create(run.store, b.item->root_key, run.options.keep_build_root));
  b.root.emplace(std::move(created));
  if (!b.root->caveat().empty()) b.ir.caveats.push_back(b.root->caveat());
  fs::path src = b.root->path() / "src";
  KILN_TRY(PreparedTree prepared, prepare_tree(m, run.fetching, b.root->path() / "scratch", src));
  for (const auto& note : prepared.notes)
    log::verbose(terminal_text(note, /*keep_newlines=*/false));
  KILN_CHECK(manifest::check_tree(m, src));
  check_interrupted();

  KILN_TRY(b.upstream, wheel::read_upstream_metadata(src));
  KILN_TRY(b.spec, base_spec(m, src, b.upstream));
  wheel::Provenance& provenance = b.provenance;
  provenance.kiln = run.options.kiln_version.empty() ? KILN_VERSION : run.options.kiln_version;
  provenance.format = wheel::kProvenanceFormat;
  provenance.recipe = resolve::kRecipeVersion;
  provenance.build_key = b.item->key;
  provenance.backend = std::string(m.backend->name);
  provenance.inputs = b.item->inputs;
  provenance.rebuild =
      rebuild_recipe(m, b.rt, run.options.kiln_commit, std::move(prepared.patches));
  KILN_TRY(compile::BuildRequest request,
           build_request(run, *b.backend, *b.item, *b.rt, b.tc, *b.root));
  KILN_TRY(b.planned, b.backend->plan(request));
  record_step(run, b, cat("prepare ", m.name), began);
  return {};
}

// The build's job logs (commands and output) kept in the cache for the user (the root goes); an
// error naming a log in the root names the kept copy instead.
Error keep_logs(Run& run, Building& b, Error e) {
  if (!b.tc || !b.root || b.logs_kept) return e;
  b.logs_kept = true;
  const fs::path kept = run.store.keep_logs(b.item->key, b.root->path() / "logs");
  return with_kept_logs(std::move(e), b.root->path(), kept, run.options.keep_build_root);
}

// Once the build's jobs succeeded: its output, the wheel written and checked.
Expected<Made> end_wheel(Run& run, Building& b) {
  const manifest::Manifest& m = *b.item->manifest;
  auto built = b.planned.finish();
  if (b.tc && !b.logs_kept) {
    b.logs_kept = true;
    (void)run.store.keep_logs(b.item->key, b.root->path() / "logs");
  }
  if (!built) return keep_logs(run, b, std::move(built).error());
  for (auto& t : built->stats.timings)  // what the backend saw inside its job (setuptools' ninja)
    run.result.jobs.push_back({std::move(t), b.ir.package, b.ir.version, b.ir.target, "", ""});
  b.ir.caveats.insert(b.ir.caveats.end(), built->caveats.begin(), built->caveats.end());
  KILN_CHECK(finish_spec(*b.item, *b.rt, b.tc, std::move(*built), b.spec, b.provenance));
  b.spec.metadata.version = b.spec.version;
  for (const auto& c : b.ir.caveats) b.provenance.caveats.push_back(entry_text(c));
  b.spec.provenance_json = wheel::provenance_text(b.provenance);

  KILN_TRY(cache::Staging staging, run.store.staging("wheel-"));
  KILN_TRY(fs::path wheel_path, wheel::write_wheel(b.spec, staging.path()));
  check_interrupted();
  KILN_CHECK(check_before_commit(wheel_path, m, b.rt, b.tc, b.upstream));
  return Made{std::move(staging), std::move(wheel_path), b.spec.version};
}

// The checked wheel committed (signed first, with a key). The item's key lock is held.
Expected<cache::Entry> commit_made(Run& run, const Building& b, Made made) {
  const manifest::Manifest& m = *b.item->manifest;
  cache::EntryInfo info;
  info.package = m.name;
  info.version = made.version;
  info.target = b.item->target_name;
  info.backend = std::string(m.backend->name);
  info.manifest_version = m.version;
  if (m.backend->compiles) info.archs = b.rt->target.archs.canonical();
  for (const auto& c : b.ir.caveats) info.caveats.push_back(entry_text(c));
  std::string attestation;
  if (run.options.signing_key) {
    KILN_TRY(std::string sha256, sha256_file(made.wheel));
    KILN_TRY(attestation, attest::attest_wheel(made.wheel, made.wheel.filename().string(), sha256,
                                               *run.options.signing_key));
  }
  return run.store.commit(b.item->key, made.wheel, std::move(info), attestation);
}

// The pool's step for a build whose jobs are done: its wheel written, checked and committed (a
// rebuild's left in staging), in kiln's thread while the other packages' jobs run on.
Expected<void> finish_build(Run& run, Building& b) {
  KILN_TRY(Made made, end_wheel(run, b));
  if (run.fresh) {
    b.made.emplace(std::move(made));
    return {};
  }
  KILN_TRY(cache::Entry entry, commit_made(run, b, std::move(made)));
  run.store.share_entry(entry);
  KILN_CHECK(record_last(run, *b.item, entry));
  b.ir.wheel = entry.wheel;
  b.ir.sha256 = entry.sha256;
  b.ir.attestation = entry.attestation;
  b.ir.seconds = now() - b.started;
  log::info(cat("built ", entry.wheel.filename().string(), " (",
                static_cast<int>(b.ir.seconds + 0.5), " s)"));
  if (!b.ir.caveats.empty())
    log::warn(cat(entry.wheel.filename().string(),
                  " may differ from the same build elsewhere: ", join(b.ir.caveats, "; ")));
  return {};
}

// Every build's jobs in one pool of --jobs slots, longest chain first across packages; each
// build's wheel step waits for its own jobs only. Per build: its error, none when it is done. An
// error of the whole run (an interrupt) is the Expected's.
Expected<std::vector<std::optional<Error>>> run_pool(Run& run, std::vector<Building*>& builds) {
  std::vector<compile::Job> jobs;
  std::vector<std::string> groups;
  for (std::size_t g = 0; g < builds.size(); ++g) {
    Building& b = *builds[g];
    const std::size_t offset = jobs.size();
    for (auto& job : b.planned.jobs) {
      job.group = static_cast<int>(g);
      for (auto& d : job.deps) d += offset;
      jobs.push_back(std::move(job));
    }
    b.planned.jobs.clear();
    compile::Job step;
    step.label = cat("wheel ", b.ir.package, " (", b.ir.target, ")");
    step.group = static_cast<int>(g);
    step.job_class = step.rank = std::numeric_limits<int>::max();
    for (std::size_t d = offset; d < jobs.size(); ++d) step.deps.push_back(d);
    step.step = [&run, &b] { return finish_build(run, b); };
    jobs.push_back(std::move(step));
    groups.push_back(cat(b.ir.package, " (", b.ir.target, ")"));
  }
  jobs = compile::pool_order(std::move(jobs));
  compile::RunnerOptions options;
  options.slots = run.options.jobs > 0 ? run.options.jobs : compile::default_slots();
  options.failures = run.options.fail_fast ? compile::RunnerOptions::Failures::Report
                                           : compile::RunnerOptions::Failures::Isolate;
  options.groups = groups;
  const double began = now();
  KILN_TRY(compile::JobStats stats, compile::run_jobs(jobs, options));
  run.result.compile_jobs += stats.run;
  run.result.objects_reused += stats.gated_done;
  for (auto& t : stats.timings) {
    const compile::Job& job = jobs[t.job];
    const ItemResult& ir = builds[static_cast<std::size_t>(job.group)]->ir;
    t.start += began - run.began;
    run.result.jobs.push_back(
        {std::move(t), ir.package, ir.version, ir.target, job.unit, job.arch});
  }
  std::vector<std::optional<Error>> errors(builds.size());
  for (auto& f : stats.failures) {
    const compile::Job& job = jobs[f.job];
    auto& error = errors[static_cast<std::size_t>(job.group)];
    if (!error)
      error = job.step ? std::move(f.error)
                       : keep_logs(run, *builds[static_cast<std::size_t>(job.group)],
                                   std::move(f.error));
  }
  for (std::size_t j : stats.skipped)  // --fail-fast stopped it
    if (auto& error = errors[static_cast<std::size_t>(jobs[j].group)]; !error)
      error = Error::failed("not built: the build stopped at the first failure (--fail-fast)");
  return errors;
}

// Why a wheel the remote cache has for `item` is not taken (empty: it is taken): it must be
// kiln's build of this very key (its kiln.json says so) and pass the checks a build passes.
std::string refuse_shared_wheel(Run& run, const resolve::PlanItem& item,
                                const fs::path& wheel_path) {
  const manifest::Manifest& m = *item.manifest;
  const std::string prefix = cat(packaging::file_name_part(m.name), "-", m.version);
  const std::string name = wheel_path.filename().string();
  if (!name.starts_with(prefix + "-") && !name.starts_with(prefix + "+"))
    return cat(name, " is not a wheel of ", m.name, " ", m.version);
  auto kiln_json = wheel::read_kiln_json(wheel_path);
  if (!kiln_json) return kiln_json.error().message;
  if (!*kiln_json) return "it has no kiln.json";
  auto provenance = wheel::parse_provenance(**kiln_json);
  if (!provenance) return provenance.error().message;
  if (provenance->build_key != item.key)
    return cat("its kiln.json names another build key (", provenance->build_key.substr(0, 16), ")");
  if (m.backend->compiles && compile::will_sandbox(run.options.sandbox) &&
      wheel::says_not_sandboxed(provenance->caveats))
    return "it was built unsandboxed, and this build runs sandboxed";
  const resolve::ResolvedTarget* rt = target_of(run.plan, item.target_name);
  const Toolchain* tc = nullptr;
  if (m.backend->compiles) {
    auto prepared = toolchain_for(run, *rt);
    if (!prepared) return prepared.error().message;
    tc = *prepared;
  }
  wheel::UpstreamMetadata none;
  auto checked = check_before_commit(wheel_path, m, rt, tc, none);
  return checked ? "" : checked.error().message;
}

// The wheel of `item` from the remote cache, validated and committed locally; nullopt when the
// remote has none that passes.
std::optional<cache::Entry> shared_hit(Run& run, const resolve::PlanItem& item) {
  if (!run.store.shared()) return std::nullopt;
  auto staging = run.store.staging("remote-");
  if (!staging) return std::nullopt;
  auto fetched = run.store.fetch_shared_wheel(item.key, staging->path());
  if (!fetched) return std::nullopt;
  if (std::string why = refuse_shared_wheel(run, item, fetched->wheel); !why.empty()) {
    log::warn(cat("remote cache: ", fetched->wheel.filename().string(), " for ",
                  item.manifest->name, " (", item.target_name, ") is refused: ", why,
                  "; building it"));
    return std::nullopt;
  }
  // The local entry says what kiln knows, not what the remote wrote: the version from the wheel's
  // name (refuse_shared_wheel checked it is this package's), the backend and archs from the plan.
  const manifest::Manifest& m = *item.manifest;
  cache::EntryInfo info;
  info.package = m.name;
  std::vector<std::string> fields = split(fetched->wheel.filename().string(), "-");
  info.version = fields.size() > 1 ? fields[1] : m.version;
  info.target = item.target_name;
  info.backend = std::string(m.backend->name);
  info.manifest_version = m.version;
  info.from = run.store.shared()->describe();
  if (m.backend->compiles)
    info.archs = target_of(run.plan, item.target_name)->target.archs.canonical();
  // The builder's attestation travels with its wheel when it says it is this wheel's; the taker
  // signs nothing (a remote hit is not its build).
  std::string attestation = std::move(fetched->attestation);
  if (!attestation.empty())
    if (auto named =
            attest::names_wheel(attestation, fetched->wheel.filename().string(), fetched->sha256);
        !named) {
      log::warn(cat("remote cache: the attestation beside ", fetched->wheel.filename().string(),
                    " is dropped: ", named.error().message));
      attestation.clear();
    }
  auto entry = run.store.commit(item.key, fetched->wheel, std::move(info), attestation);
  if (!entry) return std::nullopt;
  return *entry;
}

// Why an item that must not be built has no wheel to take.
Error not_taken(Run& run, const resolve::PlanItem& item) {
  const cache::SharedCache* shared = run.store.shared();
  std::string where = "is not in the local cache";
  if (shared)
    where = cat("is neither in the local cache nor in the remote cache ", shared->describe(),
                shared->on() ? "" : " (off after an error: see the warning above)");
  return Error::failed(cat(item.manifest->name, " ", item.manifest->version, " for target ",
                           item.target_name, " (build key ", item.key.substr(0, 16), ") ", where,
                           "; build it first"));
}

// A verified cache hit, local or remote, recorded as the package's last build; nullopt for a miss.
// The item's key lock is held.
Expected<std::optional<ItemResult>> take_hit(Run& run, const resolve::PlanItem& item) {
  const manifest::Manifest& m = *item.manifest;
  double started = now();
  ItemResult ir = item_result(item);
  std::string damaged;
  auto hit = run.store.lookup_verified(item.key, damaged);
  if (!damaged.empty())
    log::warn(cat("cache entry ", item.key.substr(0, 16), " of ", m.name, " was damaged (", damaged,
                  "); it was removed and is built again"));
  auto taken = [&](const cache::Entry& entry,
                   const char* why) -> Expected<std::optional<ItemResult>> {
    KILN_CHECK(record_last(run, item, entry));
    ir.wheel = entry.wheel;
    ir.sha256 = entry.sha256;
    ir.caveats = entry.info.caveats;  // the build's, as its entry recorded them
    ir.attestation = entry.attestation;
    if (run.options.explain) ir.why.push_back(why);
    ir.seconds = now() - started;
    return std::optional<ItemResult>(std::move(ir));
  };
  if (hit && run.options.build && m.backend->compiles &&
      compile::will_sandbox(run.options.sandbox) && wheel::says_not_sandboxed(hit->info.caveats)) {
    // A wheel whose package's code ran unsandboxed is built again, sandboxed, in its place.
    log::warn(cat("cache entry ", item.key.substr(0, 16), " of ", m.name,
                  " was built unsandboxed; it is built again in the sandbox"));
    KILN_CHECK(run.store.remove(item.key));
    hit.reset();
  }
  if (hit) {
    ir.cache_hit = true;
    return taken(*hit, "cache hit: nothing changed");
  }
  if (auto shared = shared_hit(run, item)) {
    ir.remote_hit = true;
    log::info(cat("took ", shared->wheel.filename().string(), " from the remote cache"));
    return taken(*shared, "remote cache hit");
  }
  if (!run.options.build) return not_taken(run, item);
  return std::nullopt;
}

// What the items came to: a result or an error each (neither: not reached).
struct Outcomes {
  std::vector<std::optional<ItemResult>> done;
  std::vector<std::optional<Error>> failed;
  bool stop = false;  // --fail-fast after a failure
  void fail(std::size_t i, Error e, bool fail_fast) {
    failed[i] = std::move(e);
    stop = stop || fail_fast;
  }
};

// The misses built, in rounds: each round prepares its builds (one per build root: the same
// package for two targets shares one, so waits a round; roots taken in their keys' order), then
// runs all their jobs in one pool. A build whose restore found its object gone is planned again
// in the next round.
Expected<void> build_misses(Run& run, std::vector<std::size_t> pending, Outcomes& out) {
  std::map<std::size_t, int> attempts;
  while (!pending.empty() && !out.stop) {
    std::vector<std::unique_ptr<Building>> round;
    std::vector<std::size_t> later;
    std::set<std::string> roots;
    for (std::size_t i : pending) {
      const resolve::PlanItem& item = run.plan.items[i];
      if (!roots.insert(item.root_key).second) {
        later.push_back(i);
        continue;
      }
      auto b = std::make_unique<Building>();
      b->index = i;
      b->item = &item;
      b->rt = target_of(run.plan, item.target_name);
      b->ir = item_result(item);
      round.push_back(std::move(b));
    }
    std::sort(round.begin(), round.end(),
              [](const auto& a, const auto& b) { return a->item->root_key < b->item->root_key; });
    std::vector<Building*> started;
    for (auto& b : round) {
      if (out.stop) break;
      check_interrupted();
      b->started = now();
      if (run.options.explain)
        b->ir.why = explain_miss(
            run.store.read_last(b->item->target_name, b->item->manifest->normalized_name()),
            b->item->inputs);
      if (auto ok = start_build(run, *b); !ok) {
        out.fail(b->index, keep_logs(run, *b, std::move(ok).error()), run.options.fail_fast);
        b.reset();  // its root removed now
        continue;
      }
      started.push_back(b.get());
    }
    if (out.stop) return {};
    KILN_TRY(auto errors, run_pool(run, started));
    for (std::size_t g = 0; g < started.size(); ++g) {
      Building& b = *started[g];
      if (!errors[g]) {
        out.done[b.index] = std::move(b.ir);
      } else if (*b.planned.stale && attempts[b.index]++ < 2) {
        log::warn(cat(errors[g]->message, "; planning ", b.ir.package, " again"));
        later.push_back(b.index);
      } else {
        out.fail(b.index, std::move(*errors[g]), run.options.fail_fast);
      }
    }
    round.clear();  // roots removed, loans ended
    std::sort(later.begin(), later.end());
    pending = std::move(later);
  }
  return {};
}

}  // namespace

// A signing key is in this process's memory and in a file root can read: a build that would run a
// package's code outside the sandbox could take it, and then vouch for anything. Refused.
Expected<void> check_signing(const resolve::Plan& plan, const Options& options) {
  if (!options.signing_key || !options.build || compile::will_sandbox(options.sandbox)) return {};
  for (const auto& item : plan.items)
    if (item.manifest->backend->compiles)
      return Error::bad_input(
          cat("a signing key is set, and ", item.manifest->name,
              "'s code would run unsandboxed here, where it could read the key: build with the "
              "sandbox (--sandbox required; docs/reliability.md), or without a key"));
  return {};
}

namespace {

// One pass over `items` (in their keys' order): each key's lock (without waiting: a key another
// process holds is left in `busy`; waiting, in the keys' order), its hit taken and its lock let go,
// then the misses built in one pool under their locks. An item whose key an earlier one of the
// pass has is left in `busy` too: it is that item's hit once built.
Expected<void> run_pass(Run& run, const std::vector<std::size_t>& items, bool wait, Outcomes& out,
                        std::vector<std::size_t>& busy) {
  std::map<std::string, cache::Lock> locks;
  std::set<std::string> seen;
  std::vector<std::size_t> misses;
  for (std::size_t i : items) {
    if (out.stop) break;
    check_interrupted();
    const resolve::PlanItem& item = run.plan.items[i];
    if (!seen.insert(item.key).second) {
      busy.push_back(i);
      continue;
    }
    if (wait) {
      auto lock = run.store.lock(item.key);
      if (!lock) {
        out.fail(i, std::move(lock).error(), run.options.fail_fast);
        continue;
      }
      locks.emplace(item.key, std::move(*lock));
    } else if (auto lock = run.store.try_lock(item.key)) {
      locks.emplace(item.key, std::move(*lock));
    } else {
      busy.push_back(i);
      continue;
    }
    auto hit = take_hit(run, item);
    if (!hit || *hit) locks.erase(item.key);
    if (!hit)
      out.fail(i, std::move(hit).error(), run.options.fail_fast);
    else if (*hit)
      out.done[i] = std::move(**hit);
    else
      misses.push_back(i);
  }
  std::sort(misses.begin(), misses.end());
  return build_misses(run, std::move(misses), out);
}

// The items: a pass over those whose keys no other process holds, then, with none of this
// process's locks held, passes that wait for the rest (by then mostly the other's hits). Locks
// are only ever waited for in the keys' order, and never while holding one taken out of it.
Expected<void> run_items(Run& run) {
  const auto& items = run.plan.items;
  Outcomes out{std::vector<std::optional<ItemResult>>(items.size()),
               std::vector<std::optional<Error>>(items.size())};
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return items[a].key < items[b].key; });
  Expected<void> ran;
  bool wait = false;  // each pass that waits takes at least its first item: the passes end
  for (std::vector<std::size_t> pending = std::move(order); ran && !pending.empty() && !out.stop;
       wait = true) {
    std::vector<std::size_t> busy;
    ran = run_pass(run, pending, wait, out, busy);
    pending = std::move(busy);
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (out.done[i]) run.result.items.push_back(std::move(*out.done[i]));
    if (!out.failed[i] && !out.done[i] && ran && out.stop)
      out.failed[i] =
          Error::failed("not built: the build stopped at the first failure (--fail-fast)");
    if (out.failed[i]) run.result.failures.push_back({item_result(items[i]), *out.failed[i]});
  }
  if (!ran) return ran;
  if (!run.result.failures.empty()) run.result.error = run.result.failures.front().error;
  return {};
}

Floor floor_of(const Result& result, int slots, double wall) {
  Floor f;
  f.wall_seconds = wall;
  f.slots = slots;
  for (const auto& j : result.jobs) {
    if (j.timing.verdict != compile::JobStats::Verdict::Compiled || j.timing.lane < 0) continue;
    f.cpu_seconds += j.timing.cpu_seconds;
    f.longest_job_seconds = std::max(f.longest_job_seconds, j.timing.seconds);
  }
  f.floor_seconds = std::max(f.longest_job_seconds, f.cpu_seconds / std::max(slots, 1));
  return f;
}

}  // namespace

Expected<Result> run(const resolve::Plan& plan, const Options& options) {
  KILN_CHECK(check_signing(plan, options));
  Result result;
  cache::Store store(options.cache);
  store.set_shared(options.shared);
  KILN_TRY(std::unique_ptr<Fetching> fetching,
           Fetching::create(store, options.offline, options.index_url));
  Run state{plan, options, store, *fetching, {}, result};
  if (auto ran = run_items(state); !ran) result.error = std::move(ran).error();
  result.downloads = fetching->downloads();
  result.local = store.local_stats();
  result.floor = floor_of(result, options.jobs > 0 ? options.jobs : compile::default_slots(),
                          now() - state.began);
  return result;
}

Expected<fs::path> build_fresh(cache::Store& store, const resolve::Plan& plan,
                               const Options& options, const Fresh& fresh) {
  if (plan.items.size() != 1) return Error::failed("a rebuild builds exactly one item");
  const resolve::PlanItem& item = plan.items[0];
  Result result;
  KILN_TRY(std::unique_ptr<Fetching> fetching,
           Fetching::create(store, options.offline, options.index_url));
  Run state{plan, options, store, *fetching, {}, result, &fresh};
  Building b;
  b.item = &item;
  b.rt = target_of(plan, item.target_name);
  b.ir = item_result(item);
  b.started = now();
  if (auto ok = start_build(state, b); !ok) return keep_logs(state, b, std::move(ok).error());
  std::vector<Building*> builds = {&b};
  KILN_TRY(auto errors, run_pool(state, builds));
  if (errors[0]) return std::move(*errors[0]);
  for (const auto& c : b.ir.caveats) log::warn(cat("the rebuild may differ: ", c));
  fs::path out = fresh.into / b.made->wheel.filename();
  std::error_code ec;
  fs::rename(b.made->wheel, out, ec);
  if (ec)
    return Error::failed(
        cat("cannot move the rebuilt wheel to ", out.string(), ": ", ec.message()));
  return out;
}

}  // namespace kiln::pipeline
