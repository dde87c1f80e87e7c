#include "rebuild/recipe.h"

#include <algorithm>

#include "core/fs.h"
#include "core/hash.h"
#include "core/process.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "manifest/canonical_text.h"
#include "packaging/name.h"
#include "packaging/version.h"

namespace kiln::rebuild {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::size_t kMaxPatches = 256;

Error refused(const std::string& why) {
  return Error::bad_input(cat("kiln.json: ", why));
}

// A patch's name as a manifest may write it: a relative path of plain components.
bool is_patch_name(std::string_view name) {
  if (name.empty() || name.size() > 255 || name.front() == '/') return false;
  for (const auto& part : split(name, "/", /*skip_empty=*/false))
    if (part.empty() || part == "." || part == "..") return false;
  return name.find('\0') == std::string_view::npos;
}

// The series the inputs name, each with its bytes from the recipe, written under `dir`.
Expected<void> write_patches(const json& named, const wheel::RebuildRecipe& r,
                             const fs::path& dir) {
  if (!named.is_array()) return refused("inputs.package.patches is not an array");
  if (named.size() != r.patches.size() || named.size() > kMaxPatches)
    return refused(cat("inputs.package.patches names ", named.size(),
                       " patches, rebuild.patches holds ", r.patches.size()));
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& p = r.patches[i];
    if (!named[i].is_object() || named[i].value("name", json()) != p.name ||
        named[i].value("sha256", json()) != p.sha256)
      return refused(
          cat("rebuild.patches[", i, "] is not the patch inputs.package.patches[", i, "] names"));
    if (!is_patch_name(p.name)) return refused(cat("rebuild.patches[", i, "] has a bad name"));
    if (sha256_hex(p.bytes) != p.sha256)
      return refused(
          cat("rebuild.patches[", i, "] (", p.name, ") is not the bytes its sha256 names"));
    KILN_CHECK(write_file_atomic(dir / p.name, p.bytes));
  }
  return {};
}

bool is_http(std::string_view url) {
  std::string head = lower(url.substr(0, 8));
  return head.starts_with("https://") || head.starts_with("http://");
}

// Whether the member at `pointer` of `doc` is there and is `value`.
bool member_is(const json& doc, const char* pointer, const json& value) {
  const json::json_pointer at(pointer);
  return doc.contains(at) && doc[at] == value;
}

bool is_local(const json& package) {
  return member_is(package, "/source/kind", 3);  // Source::Kind::Local
}

// What nobody but the builder could fetch again.
std::vector<std::string> unverifiable_inputs(const json& inputs) {
  std::vector<std::string> out;
  if (member_is(inputs, "/package/source/kind", 3))
    out.push_back("source: a local tree of the builder's (only its tree sha256 is recorded)");
  if (member_is(inputs, "/target/torch/source", "environment"))
    out.push_back("torch: the builder's Python environment's (no wheel sha256 is recorded)");
  if (member_is(inputs, "/target/cuda/toolkit", "system"))
    out.push_back(
        "CUDA toolkit: the builder's own (compared by its nvcc --version and include/ digest, "
        "not fetched)");
  return out;
}

// A program or directory the target names that a rebuild runs or reads (its interpreter, host
// compiler, system toolkit's home; a bare name as found on this user's PATH) must be one only root
// and this user control: a stranger's wheel may not point kiln at what another user planted.
Expected<void> check_target_paths(const json& target) {
  for (const char* pointer : {"/python/interpreter", "/cxx", "/cuda/home"}) {
    const json::json_pointer at(pointer);
    if (!target.contains(at) || !target[at].is_string()) continue;
    std::string named = target[at].get<std::string>();
    if (named.empty()) continue;
    fs::path path = named.find('/') == std::string::npos ? find_program(named) : fs::path(named);
    if (path.empty()) continue;  // not on PATH: planning says so
    if (auto trusted = check_trusted_path(path); !trusted) {
      std::string field = pointer;
      std::replace(field.begin(), field.end(), '/', '.');
      return refused(cat("inputs.target", field,
                         " is not one this rebuild may run: ", trusted.error().message));
    }
  }
  return {};
}

// inputs.shards as counts.
Expected<std::map<std::string, int>> recorded_shards(const json& inputs) {
  std::map<std::string, int> out;
  if (!inputs.contains("shards")) return out;
  const json& shards = inputs["shards"];
  if (!shards.is_object()) return refused("inputs.shards is not an object");
  for (const auto& [name, count] : shards.items()) {
    if (!count.is_number_integer() || count.get<std::int64_t>() < 1 ||
        count.get<std::int64_t>() > 4096)
      return refused(cat("inputs.shards[\"", name, "\"] is not a shard count"));
    out[name] = count.get<int>();
  }
  return out;
}

Expected<std::string> checked_name(const json& package, const char* key) {
  auto it = package.find(key);
  if (it == package.end() || !it->is_string())
    return refused(cat("inputs.package.", key, " is not a string"));
  return it->get<std::string>();
}

}  // namespace

Expected<Recipe> write_recipe(const wheel::Provenance& p, const fs::path& work,
                              const fs::path& local_source) {
  if (!p.rebuild)
    return refused(cat("it has no rebuild recipe (format ", p.format,
                       "): only wheels built by kiln with provenance format 2 can be rebuilt from "
                       "the wheel alone"));
  if (!p.inputs.is_object() || !p.inputs.contains("package"))
    return refused("inputs.package is missing");
  const json& package = p.inputs["package"];
  if (!package.is_object()) return refused("inputs.package is not an object");
  KILN_TRY(std::string name, checked_name(package, "name"));
  KILN_TRY(std::string version, checked_name(package, "version"));
  if (!packaging::is_valid_project_name(name) || packaging::normalize_name(name) != name ||
      !packaging::is_canonical_version(version))
    return refused("inputs.package names no valid project name and version");
  Recipe r{work / "manifests", work / "patches", cat(name, "==", version)};
  const wheel::RebuildRecipe& rr = *p.rebuild;
  if (is_local(package) && local_source.empty())
    return Error::bad_input(cat(name, " ", version,
                                " was built from a local tree of its builder's, which only its "
                                "tree sha256 names: rebuild it with --force --source DIR"));
  for (const std::string* url : {&rr.source_url, &rr.torch_index_url})
    if (!url->empty() && !is_http(*url))
      return refused(cat("rebuild names ", terminal_field(*url, 200),
                         ": a rebuild fetches from http(s) URLs only"));
  KILN_TRY(std::string manifest,
           manifest::manifest_text(package, {rr.source_url, rr.source_size, local_source}));
  KILN_CHECK(write_file_atomic(r.manifests / name / cat(version, ".toml"), manifest));
  if (package.contains("patches"))
    KILN_CHECK(write_patches(package["patches"], rr, r.patches / name / version));
  if (p.inputs.contains("target")) {
    KILN_CHECK(check_target_paths(p.inputs["target"]));
    KILN_TRY(std::string target, manifest::target_text(p.inputs["target"], rr.torch_index_url));
    r.target = (r.manifests / "targets" / "rebuild.toml").string();
    KILN_CHECK(write_file_atomic(r.target, target));
  }
  KILN_TRY(r.shards, recorded_shards(p.inputs));
  r.unverifiable = unverifiable_inputs(p.inputs);
  return r;
}

}  // namespace kiln::rebuild
