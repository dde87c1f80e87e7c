#include "resolve/plan.h"

#include <unistd.h>

#include <algorithm>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/backend.h"
#include "packaging/marker.h"
#include "packaging/specifier.h"
#include "packaging/wheel_name.h"
#include "toolchain/compiler.h"
#include "toolchain/cuda.h"
#include "toolchain/python.h"
#include "toolchain/torch.h"
#include "wheel/tags.h"

namespace kiln::resolve {

using manifest::BackendSpec;
using manifest::Manifest;
using manifest::Target;
using nlohmann::json;

toolchain::CudaRequest cuda_request(const Target& target) {
  toolchain::CudaRequest r;
  r.toolkit = target.cuda_toolkit;
  r.version = target.cuda_version;
  r.home = target.cuda_home;
  for (const auto& w : target.cuda_wheels) r.wheels.push_back({w.file, w.sha256});
  for (const auto& d : target.cuda_debs) r.debs.push_back({d.path, d.sha256});
  return r;
}

namespace {

// The manylinux floor of an environment's torch: the lowest platform tag its dist-info's WHEEL
// file records, or 2.28 (what torch 2.11-2.15 on PyPI need) when there is none.
int environment_floor(const toolchain::TorchSysroot& torch) {
  int floor = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(torch.root.parent_path(), ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("torch-") || !name.ends_with(".dist-info")) continue;
    auto text = read_file(entry.path() / "WHEEL", 1 << 16);
    if (!text) continue;
    for (const auto& line : split(*text, "\n")) {
      if (!line.starts_with("Tag:")) continue;
      int minor = manifest::wheel_manylinux_floor(cat("torch-0-", trim(line.substr(4)), ".whl"));
      if (minor >= 0 && (floor < 0 || minor < floor)) floor = minor;
    }
  }
  return floor >= 0 ? floor : 28;
}

// The target's torch: the pinned wheel for the probed Python, or the environment's torch.
Expected<void> resolve_torch(ResolvedTarget& rt) {
  const Target& target = rt.target;
  const toolchain::PythonInfo& python = *rt.python;
  if (target.torch_source == Target::TorchSource::Pypi) {
    const manifest::TorchWheel* wheel = nullptr;
    std::vector<std::string> tags;
    for (const auto& w : target.torch_wheels) {
      tags.push_back(w.python_tag);
      if (w.python_tag == python.abi_tag) wheel = &w;
    }
    if (!wheel)
      return Error::failed(cat("target ", target.name, " pins no torch ", target.torch_version,
                               " wheel for ", python.abi_tag, " (Python ", python.version, " at ",
                               python.executable, "); it has: ", join(tags, ", ")));
    rt.toolchain["torch"] = {
        {"version", target.torch_version}, {"file", wheel->file}, {"sha256", wheel->sha256}};
    int floor = manifest::wheel_manylinux_floor(wheel->file);
    rt.manylinux = target.manylinux >= 0 ? target.manylinux : floor >= 0 ? floor : 28;
    return {};
  }
  auto torch = toolchain::torch_from_environment(python.executable);
  if (!torch) return Error::failed(cat("target ", target.name, ": ", torch.error().message));
  rt.toolchain["torch"] = {{"environment", python.executable}, {"identity", torch->identity()}};
  rt.manylinux = target.manylinux >= 0 ? target.manylinux : environment_floor(*torch);
  rt.torch = std::move(*torch);
  return {};
}

// The CUDA release a toolkit of pinned wheels holds: its nvcc wheel's version
// ("nvidia_cuda_nvcc-13.2.86-…" -> "13.2"), else the version the target declares.
std::string wheel_toolkit_release(const Target& target) {
  for (const auto& w : target.cuda_wheels) {
    if (w.project() != "nvidia-cuda-nvcc" && w.project() != "nvidia-cuda-nvcc-cu12") continue;
    auto wheel = packaging::parse_wheel_file_name(w.file);
    if (!wheel) continue;
    const auto& release = wheel->parsed_version.release();
    if (release.size() >= 2) return cat(release[0], ".", release[1]);
  }
  return target.cuda_version;
}

// The system toolkit is found and asked for its version; the wheel toolkit is its pins. Either
// must build every arch the target asks for.
Expected<void> resolve_cuda(ResolvedTarget& rt) {
  const Target& target = rt.target;
  auto cuda = toolchain::make_cuda_source(cuda_request(target), {}, {});
  auto cuda_id = cuda->identity();
  if (!cuda_id)
    return Error{cuda_id.error().kind, cat("target ", target.name, ": ", cuda_id.error().message),
                 cuda_id.error().detail};
  std::string release = wheel_toolkit_release(target);
  if (target.cuda_toolkit == manifest::ToolkitKind::System) {
    KILN_TRY(toolchain::CudaToolkit found, cuda->toolkit());
    KILN_CHECK(
        toolchain::check_cuda_matches(found, target.cuda_version, cat("target ", target.name)));
    release = found.version;
    rt.cuda = std::move(found);
  }
  if (target.cuda_toolkit ==
      manifest::ToolkitKind::Debian)  // the pinned release, known from its pins
    release = (*cuda_id)["release"].get<std::string>();
  if (std::string problem = manifest::archs_toolkit_problem(target.archs, release);
      !problem.empty())
    return Error::bad_input(cat("target ", target.name, ": ", problem));
  rt.toolchain["cuda"] = *cuda_id;
  return {};
}

// Probes the target's Python, torch, CUDA toolkit and host compiler; checks CUDA against the
// target and the host compiler against the system toolkit's GCC range.
Expected<ResolvedTarget> resolve_target(const Target& target) {
  ResolvedTarget rt{target, json::object(), "", {}, {}, {}, {}, 28};
  auto python = toolchain::probe_python(target.interpreter());
  if (!python)
    return Error::failed(cat("target ", target.name, ": ", python.error().message),
                         python.error().detail);
  rt.python_tag = python->abi_tag;
  rt.toolchain["python"] = python->identity();
  rt.python = std::move(*python);
  KILN_CHECK(resolve_torch(rt));
  KILN_CHECK(resolve_cuda(rt));
  auto cxx = toolchain::probe_compiler(target.cxx);
  if (!cxx) return Error::failed(cat("target ", target.name, ": ", cxx.error().message));
  rt.toolchain["cxx"] = cxx->identity();
  // A toolkit of pinned packages is checked once the build has laid it out.
  if (rt.cuda) {
    if (auto fits = toolchain::check_host_compiler(*rt.cuda, *cxx); !fits)
      return Error::bad_input(cat("target ", target.name, ": ", fits.error().message));
  }
  rt.cxx = std::move(*cxx);
  return rt;
}

}  // namespace

int shard_count(int units, int slots, int max_shards) {
  if (slots <= 0) {
    long n = ::sysconf(_SC_NPROCESSORS_ONLN);
    slots = n > 0 ? static_cast<int>(n) : 1;
  }
  if (max_shards > 0) slots = std::min(slots, max_shards);
  if (units <= 1) return 1;
  // Measured on 16 cores (bench/results/native-speed-*.md): causal-conv1d's backward file in 18
  // shards built in 78 s, in 9 shards of 2 in 59 s: its heavy units alone ran as long under full
  // load as in pairs, and each extra shard repeats the front end. So: fewest shards for the
  // smallest largest shard.
  int first = std::min(units, slots);
  int per_shard = (units + first - 1) / first;
  return (units + per_shard - 1) / per_shard;
}

namespace {

// The package's sources as the key sees them (a local tree without a sha256 by its contents).
Expected<json> package_inputs(const Manifest& manifest, PlanItem& item) {
  json package = manifest.canonical();
  if (manifest.source.kind == manifest::Source::Kind::Local && manifest.source.sha256.empty()) {
    KILN_TRY(std::string tree, tree_sha256(manifest.source.path));
    package["source"]["tree_sha256"] = tree;
  }
  item.root_key = sha256_hex(json{{"build-root", manifest.normalized_name()}}.dump());
  return package;
}

// One package for one target (a pure package ignores the toolchain), its inputs and key. Compiled
// packages depend on the whole toolchain, the arch set and the manylinux floor; the native
// backend's on the shard counts of its shardable sources too, which depend on `slots` (0: one per
// core); the setuptools backend's on the pins of its build environment.
Expected<PlanItem> plan_item(const Manifest& manifest, const ResolvedTarget& target, int slots,
                             const manifest::BuildEnvPins& build_env) {
  const manifest::BackendSpec& backend = *manifest.backend;
  PlanItem item{&manifest, target.target.name};
  KILN_TRY(json package, package_inputs(manifest, item));
  item.inputs = {{"recipe", kRecipeVersion}, {"package", std::move(package)}};
  json& inputs = item.inputs;
  if (backend.compiles) {
    inputs["target"] = target.target.canonical();
    inputs["toolchain"] = target.toolchain;
    inputs["manylinux"] = target.manylinux;
    item.object_salt = json{{"recipe", kRecipeVersion},
                            {"cuda", target.toolchain.value("cuda", json())},
                            {"cxx", target.toolchain.value("cxx", json())}}
                           .dump();
  }
  if (backend.builds_extensions) {
    for (const auto& e : manifest.extensions)
      for (const auto& s : e.shards)
        item.shards[e.name + "/" + s.source] = shard_count(s.units, slots, s.max_shards);
    if (!item.shards.empty()) inputs["shards"] = item.shards;
  }
  if (backend.needs_build_env) {
    bool pinned_torch = target.target.torch_source == Target::TorchSource::Pypi;
    inputs["build_env"] = build_env.identity(pinned_torch ? target.target.torch_version : "");
  }
  item.key = sha256_hex(inputs.dump());
  return item;
}

}  // namespace

Expected<void> use_shards(PlanItem& item, const std::map<std::string, int>& shards) {
  std::map<std::string, int> units;  // the most shards each source may have
  for (const auto& e : item.manifest->extensions)
    for (const auto& s : e.shards)
      units[e.name + "/" + s.source] = s.max_shards > 0 ? s.max_shards : s.units;
  for (const auto& [source, n] : shards) {
    auto it = units.find(source);
    if (it == units.end() || !item.shards.count(source))
      return Error::bad_input(cat("the recorded shards name ", source,
                                  ", which is no shardable source of ", item.manifest->name));
    if (n < 1 || n > std::max(it->second, 1))
      return Error::bad_input(cat("the recorded shard count of ", source, " (", n,
                                  ") is not between 1 and its limit, ", it->second));
  }
  if (shards.size() != item.shards.size())
    return Error::bad_input(cat("the recorded shards name ", shards.size(), " sources; ",
                                item.manifest->name, " has ", item.shards.size()));
  item.shards = shards;
  if (!shards.empty()) item.inputs["shards"] = shards;
  item.key = sha256_hex(item.inputs.dump());
  return {};
}

std::string target_local_label(const ResolvedTarget& target) {
  const std::string& torch = target.torch ? target.torch->version : target.target.torch_version;
  return wheel::local_label(target.target.cuda_version, torch);
}

namespace {

// "3.12" of the target's Python: the probed interpreter's, else its tag's, else the target's
// `python.version`; "" when none is known (an interpreter not probed for a pure package).
std::string python_minor(const ResolvedTarget& rt) {
  if (rt.python) {
    auto parts = split(rt.python->version, ".");
    if (parts.size() >= 2) return cat(parts[0], ".", parts[1]);
  }
  std::string_view tag = rt.python_tag;
  if (tag.size() > 3 && tag.starts_with("cp")) return cat(tag.substr(2, 1), ".", tag.substr(3));
  return rt.target.python_version;
}

}  // namespace

packaging::MarkerEnvironment marker_environment(const ResolvedTarget& rt) {
  packaging::MarkerEnvironment env = {
      {"os_name", "posix"},
      {"sys_platform", "linux"},
      {"platform_system", "Linux"},
      {"platform_machine", "x86_64"},
      {"extra", ""},
      {"implementation_name", "cpython"},
      {"platform_python_implementation", "CPython"},
  };
  if (std::string minor = python_minor(rt); !minor.empty()) env["python_version"] = minor;
  if (rt.python) {
    env["python_full_version"] = rt.python->version;
    env["implementation_version"] = rt.python->version;
  }
  return env;
}

namespace {

// A selected manifest, the local labels its arguments named and their markers ("" for an
// argument without one: it applies everywhere).
struct Selected {
  const Manifest* manifest;
  std::string spec;
  std::vector<std::string> labels;
  std::vector<std::string> markers;
};

Expected<std::vector<Selected>> select_packages(const manifest::Repository& repo,
                                                const std::vector<std::string>& packages) {
  std::vector<Selected> selected;
  if (packages.empty()) {
    KILN_TRY(std::vector<const Manifest*> newest, repo.newest_of_each());
    for (const Manifest* m : newest) selected.push_back({m, m->name, {}, {""}});
    return selected;
  }
  for (const auto& spec : packages) {
    KILN_TRY(packaging::Requirement requirement, packaging::parse_requirement(spec));
    KILN_TRY(const Manifest* m, repo.select(requirement));
    std::vector<std::string> labels = requirement.specifiers.local_labels();
    auto same = std::find_if(selected.begin(), selected.end(),
                             [&](const Selected& s) { return s.manifest == m; });
    if (same == selected.end()) {
      selected.push_back({m, spec, std::move(labels), {requirement.marker}});
    } else {
      same->labels.insert(same->labels.end(), labels.begin(), labels.end());
      same->markers.push_back(requirement.marker);
    }
  }
  return selected;
}

// --backend: copies of the manifests with that backend (kept alive by the plan).
Expected<void> override_backend(Plan& plan, std::vector<const Manifest*>& selected,
                                const BackendSpec& spec) {
  for (const Manifest*& m : selected) {
    if (m->backend == &spec) continue;
    if (spec.builds_extensions && m->extensions.empty())
      return Error::bad_input(cat("--backend ", spec.name, ": ", m->name, " ", m->version,
                                  " declares no [[build.extension]] (", m->display_path, ")"));
    if (spec.ships_packages_only && m->packages.empty())
      return Error::bad_input(cat("--backend ", spec.name, ": ", m->name, " ", m->version,
                                  " declares no build.packages (", m->display_path, ")"));
    auto copy = std::make_shared<Manifest>(*m);
    copy->backend = &spec;
    plan.overridden.push_back(copy);
    m = copy.get();
  }
  return {};
}

// Whether an argument naming the package applies to the target: one without a marker, or one
// whose marker is true there (a false one is left out as pip leaves it out, and said in `ignored`).
Expected<bool> applies(const Selected& s, const ResolvedTarget& rt,
                       std::vector<std::string>& ignored) {
  packaging::MarkerEnvironment env = marker_environment(rt);
  for (const auto& marker : s.markers) {
    if (marker.empty()) return true;
    auto value = packaging::evaluate_marker(marker, env);
    if (!value)
      return Error::bad_input(
          cat("'", s.spec, "' for target ", rt.target.name, ": ", value.error().message));
    if (*value) return true;
  }
  std::string python = python_minor(rt);
  ignored.push_back(cat("ignoring '", s.spec, "' for target ", rt.target.name,
                        python.empty() ? std::string() : cat(" (Python ", python, ")"),
                        ": its marker is false there"));
  return false;
}

bool any_marker(const std::vector<Selected>& chosen) {
  return std::any_of(chosen.begin(), chosen.end(), [](const Selected& s) {
    return std::any_of(s.markers.begin(), s.markers.end(),
                       [](const std::string& m) { return !m.empty(); });
  });
}

// A local label in a package's argument names the wheel kiln builds for one target: it must be
// that target's (a pure package's wheel has none).
Expected<void> check_labels(const Selected& s, const Manifest& m, const ResolvedTarget& rt) {
  for (const auto& label : s.labels) {
    if (!m.backend->compiles)
      return Error::bad_input(cat("'", s.spec, "': ", m.name, " is a pure package: its wheel's ",
                                  "version has no local label (+", label, "); give ", m.name,
                                  "==", m.version));
    std::string expected = target_local_label(rt);
    if (label != expected)
      return Error::bad_input(cat("'", s.spec, "': the local label +", label, " is not the label ",
                                  "of target ", rt.target.name, ", +", expected, " (", m.name, " ",
                                  m.version, "+", expected, " is what kiln builds for it; ",
                                  "name the target the label belongs to, or leave the label out)"));
  }
  return {};
}

}  // namespace

Expected<Plan> make_plan(const manifest::Repository& repo, const std::vector<std::string>& packages,
                         const std::vector<Target>& targets, int slots, const BackendSpec* backend,
                         bool skip_unusable_targets) {
  KILN_TRY(std::vector<Selected> chosen, select_packages(repo, packages));
  std::vector<const Manifest*> selected;
  for (const auto& c : chosen) selected.push_back(c.manifest);
  Plan plan;
  if (backend) KILN_CHECK(override_backend(plan, selected, *backend));
  auto any = [&](bool manifest::BackendSpec::*trait) {
    return std::any_of(selected.begin(), selected.end(),
                       [&](const Manifest* m) { return m->backend->*trait; });
  };
  if (any(&manifest::BackendSpec::needs_build_env)) {
    KILN_TRY(plan.build_env, repo.build_env());
  }
  // Pure packages depend on no toolchain: a plan of only those probes nothing (no Python, CUDA
  // or compiler needed on the machine).
  bool compiled = any(&manifest::BackendSpec::compiles);
  for (const auto& target : targets) {
    if (!compiled) {
      plan.targets.push_back(ResolvedTarget{target, json::object(), "", {}, {}, {}, {}});
      // A marker may name the Python: probed then (its result enters no key).
      if (any_marker(chosen))
        if (auto python = toolchain::probe_python(target.interpreter()))
          plan.targets.back().python = std::move(*python);
      continue;
    }
    auto rt = resolve_target(target);
    if (!rt && skip_unusable_targets) {
      plan.skipped_targets.push_back(std::move(rt).error());
      continue;
    }
    if (!rt) return std::move(rt).error();
    plan.targets.push_back(std::move(*rt));
  }
  if (plan.targets.empty() && !plan.skipped_targets.empty()) return plan.skipped_targets.front();
  for (const auto& rt : plan.targets) {
    for (std::size_t i = 0; i < selected.size(); ++i) {
      KILN_TRY(bool wanted, applies(chosen[i], rt, plan.ignored));
      if (!wanted) continue;
      KILN_CHECK(check_labels(chosen[i], *selected[i], rt));
      KILN_TRY(PlanItem item, plan_item(*selected[i], rt, slots, plan.build_env));
      plan.items.push_back(std::move(item));
    }
  }
  return plan;
}

}  // namespace kiln::resolve
