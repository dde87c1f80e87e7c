#include "attest/statement.h"

#include <set>
#include <utility>

#include "core/hash.h"
#include "core/json.h"
#include "core/strings.h"

namespace kiln::attest {

using nlohmann::json;

namespace {

// The last part of a URL's path ("" when none).
std::string url_file(std::string_view url) {
  url = url.substr(0, std::min(url.find_first_of("?#"), url.size()));
  std::size_t slash = url.rfind('/');
  return slash == std::string_view::npos ? "" : std::string(url.substr(slash + 1));
}

// `key` of the object `j` when it is a string, else "".
std::string text_of(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The package's source as a ResourceDescriptor: its archive by sha256, a git commit, or a local
// tree by kiln's tree hash.
json source_descriptor(const json& package, const wheel::Provenance& p) {
  const json& source = package["source"];
  const std::string url = p.rebuild ? p.rebuild->source_url : "";
  json d = json::object();
  if (std::string commit = text_of(source, "commit"); !commit.empty()) {
    if (!url.empty()) d["uri"] = cat("git+", url);
    d["digest"] = {{"gitCommit", commit}};
    return d;
  }
  if (std::string tree = text_of(source, "tree_sha256"); !tree.empty()) {
    d["name"] = "source tree";
    d["annotations"] = {{"kiln_tree_sha256", tree}};
    return d;
  }
  std::string name = text_of(source, "file");
  if (name.empty()) name = url_file(url);
  d["name"] = name.empty() ? "source" : name;
  if (!url.empty()) d["uri"] = url;
  if (std::string pypi = text_of(source, "pypi"); !pypi.empty())
    d["uri"] = cat("pkg:pypi/", pypi, "@", text_of(package, "version"));
  if (std::string sha = text_of(source, "sha256"); is_sha256_hex(sha))
    d["digest"] = {{"sha256", sha}};
  return d;
}

// Every object under `j` that names a file ("file", "path" or "name") beside a sha256, in the
// order nlohmann's sorted objects walk them; each once.
void files_with_digests(const json& j, json& out,
                        std::set<std::pair<std::string, std::string>>& seen, int depth = 0) {
  if (depth > 16) return;
  if (j.is_object()) {
    auto sha = j.find("sha256");
    if (sha != j.end() && sha->is_string() && is_sha256_hex(sha->get<std::string>())) {
      for (const char* key : {"file", "path", "name"}) {
        auto name = j.find(key);
        if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) continue;
        if (seen.insert({name->get<std::string>(), sha->get<std::string>()}).second)
          out.push_back({{"name", *name}, {"digest", {{"sha256", *sha}}}});
        break;
      }
    }
  }
  if (j.is_object() || j.is_array())
    for (const auto& child : j) files_with_digests(child, out, seen, depth + 1);
}

json resolved_dependencies(const wheel::Provenance& p) {
  json deps = json::array();
  const json& inputs = p.inputs;
  if (inputs.is_object() && inputs.contains("package") && inputs["package"].is_object()) {
    const json& package = inputs["package"];
    if (package.contains("source") && package["source"].is_object())
      deps.push_back(source_descriptor(package, p));
    std::set<std::pair<std::string, std::string>> seen;
    if (package.contains("patches")) files_with_digests(package["patches"], deps, seen);
    // The target's own inputs list the torch wheels of every Python it pins; the toolchain names
    // the one this build used.
    for (const char* part : {"toolchain", "build_env"})
      if (inputs.contains(part)) files_with_digests(inputs[part], deps, seen);
  }
  return deps;
}

json internal_parameters(const wheel::Provenance& p) {
  json whole = wheel::to_json(p);
  json internal = {{"build_key", p.build_key},
                   {"recipe", p.recipe},
                   {"backend", p.backend},
                   {"format", p.format},
                   {"sandboxed", !wheel::says_not_sandboxed(p.caveats)},
                   {"caveats", p.caveats}};
  if (p.archs) internal["archs"] = *p.archs;
  for (const char* part : {"tools", "platform", "setuptools"})
    if (whole.contains(part)) internal[part] = whole[part];
  if (p.inputs.is_object())
    for (const auto& [name, value] : p.inputs.items())
      if (name != "package" && name != "target") internal["inputs"][name] = value;
  return internal;
}

json external_parameters(const wheel::Provenance& p) {
  json external = json::object();
  if (p.inputs.is_object())
    for (const char* part : {"package", "target"})
      if (p.inputs.contains(part)) external[part] = p.inputs[part];
  return external;
}

}  // namespace

json slsa_predicate(const wheel::Provenance& p, std::string_view key_id) {
  json version = {{"kiln", p.kiln}};
  if (p.rebuild && !p.rebuild->kiln_commit.empty()) version["kiln_commit"] = p.rebuild->kiln_commit;
  return {{"buildDefinition",
           {{"buildType", kBuildType},
            {"externalParameters", external_parameters(p)},
            {"internalParameters", internal_parameters(p)},
            {"resolvedDependencies", resolved_dependencies(p)}}},
          {"runDetails",
           {{"builder", {{"id", cat("urn:kiln:key:", key_id)}, {"version", version}}},
            {"metadata", {{"invocationId", p.build_key}}}}}};
}

json make_statement(std::string_view wheel_name, std::string_view sha256, json predicate) {
  return {{"_type", kStatementType},
          {"subject", json::array({{{"name", wheel_name}, {"digest", {{"sha256", sha256}}}}})},
          {"predicateType", kProvenanceType},
          {"predicate", std::move(predicate)}};
}

std::string statement_text(const json& statement) {
  return statement.dump(-1, ' ', false, json::error_handler_t::replace);
}

Expected<ReadStatement> read_statement(std::string_view payload) {
  json j = parse_json(payload);
  if (j.is_discarded() || !j.is_object()) return Error::bad_input("the payload is not JSON");
  if (j.value("_type", json()) != json(kStatementType))
    return Error::bad_input(cat("the payload's _type is not ", kStatementType));
  if (j.value("predicateType", json()) != json(kProvenanceType))
    return Error::bad_input(cat("the predicateType is not ", kProvenanceType));
  auto subjects = j.find("subject");
  if (subjects == j.end() || !subjects->is_array() || subjects->empty())
    return Error::bad_input("the statement has no subject");
  ReadStatement out;
  for (const auto& s : *subjects) {
    if (!s.is_object() || !s.contains("digest") || !s["digest"].is_object())
      return Error::bad_input("a subject without a digest object");
    Subject subject;
    if (s.contains("name") && s["name"].is_string()) subject.name = s["name"].get<std::string>();
    const json& digest = s["digest"];
    for (const auto& [algorithm, value] : digest.items())
      if (!value.is_string())
        return Error::bad_input(cat("a subject's ", algorithm, " is no string"));
    if (digest.contains("sha256")) subject.sha256 = digest["sha256"].get<std::string>();
    out.subjects.push_back(std::move(subject));
  }
  auto predicate = j.find("predicate");
  if (predicate == j.end() || !predicate->is_object())
    return Error::bad_input("the statement has no predicate object");
  out.predicate = *predicate;
  return out;
}

std::string first_difference(const json& a, const json& b) {
  if (a == b) return "";
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      if (!a.contains(k) || !b.contains(k)) return k;
      std::string below = first_difference(a[k], b[k]);
      if (!below.empty()) return below == "." ? k : cat(k, ".", below);
    }
  }
  if (a.is_array() && b.is_array() && a.size() == b.size())
    for (std::size_t i = 0; i < a.size(); ++i) {
      std::string below = first_difference(a[i], b[i]);
      if (!below.empty()) return below == "." ? cat(i) : cat(i, ".", below);
    }
  return ".";
}

}  // namespace kiln::attest
