#include "wheel/provenance.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/strings.h"

namespace kiln::wheel {

using json = nlohmann::json;

namespace {

std::string a_type(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "binary";
  }
}

// Reading throws this internally; provenance_from_json returns it.
[[noreturn]] void wrong(const std::string& path, const json& v, const char* want) {
  raise(Error::bad_input(cat("kiln.json: ", path, " is ", a_type(v), ", not ", want)));
}

// One object of kiln.json, its members read at their paths ("tools.torch.version"); an absent
// member leaves the output as it was.
class Object {
 public:
  Object(const json& j, std::string path) : j_(&j), path_(std::move(path)) {
    if (!j.is_object()) wrong(path_, j, "an object");
  }
  const json* get(const char* key) const {
    auto it = j_->find(key);
    return it == j_->end() ? nullptr : &*it;
  }
  std::string at(const char* key) const { return path_.empty() ? key : cat(path_, ".", key); }
  void read(const char* key, std::string& out) const {
    if (const json* v = get(key)) out = string(*v, at(key));
  }
  void read(const char* key, std::optional<std::string>& out) const {
    if (const json* v = get(key)) out = string(*v, at(key));
  }
  void read(const char* key, bool& out) const {
    if (const json* v = get(key)) {
      if (!v->is_boolean()) wrong(at(key), *v, "a boolean");
      out = v->get<bool>();
    }
  }
  void read(const char* key, int& out) const {
    if (const json* v = get(key)) {
      if (!v->is_number_integer()) wrong(at(key), *v, "an integer");
      constexpr std::int64_t lo = std::numeric_limits<int>::min(),
                             hi = std::numeric_limits<int>::max();
      bool fits = v->is_number_unsigned()
                      ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi)
                      : v->get<std::int64_t>() >= lo && v->get<std::int64_t>() <= hi;
      if (!fits) raise(Error::bad_input(cat("kiln.json: ", at(key), " is out of range")));
      out = v->get<int>();
    }
  }
  void read(const char* key, std::optional<std::uint64_t>& out) const {
    if (const json* v = get(key)) {
      if (!v->is_number_unsigned()) wrong(at(key), *v, "a size in bytes");
      out = v->get<std::uint64_t>();
    }
  }
  void read(const char* key, std::vector<std::string>& out) const {
    if (const json* v = get(key)) {
      if (!v->is_array()) wrong(at(key), *v, "an array of strings");
      out.clear();
      for (std::size_t i = 0; i < v->size(); ++i)
        out.push_back(string((*v)[i], cat(at(key), "[", i, "]")));
    }
  }
  void read(const char* key, std::optional<std::vector<std::string>>& out) const {
    if (get(key)) read(key, out.emplace());
  }
  // An array of objects, each read by `read_one` at its path ("cuda.wheels[0]").
  template <typename T, typename Read>
  void read(const char* key, std::optional<std::vector<T>>& out, Read read_one) const {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_array()) wrong(at(key), *v, "an array");
    out.emplace();
    for (std::size_t i = 0; i < v->size(); ++i)
      out->push_back(read_one(Object((*v)[i], cat(at(key), "[", i, "]"))));
  }
  std::optional<Object> object(const char* key) const {
    if (const json* v = get(key)) return Object(*v, at(key));
    return std::nullopt;
  }

 private:
  static std::string string(const json& v, const std::string& path) {
    if (!v.is_string()) wrong(path, v, "a string");
    return v.get<std::string>();
  }
  const json* j_;
  std::string path_;
};

InputFacts::Cuda read_cuda(const Object& o) {
  InputFacts::Cuda c;
  o.read("toolkit", c.toolkit);
  o.read("version", c.version);
  o.read("wheels", c.wheels, [](const Object& e) {
    InputFacts::CudaWheel w;
    e.read("file", w.file);
    e.read("sha256", w.sha256);
    return w;
  });
  o.read("debs", c.debs, [](const Object& e) {
    InputFacts::CudaDeb d;
    e.read("path", d.path);
    e.read("sha256", d.sha256);
    return d;
  });
  return c;
}

InputFacts read_facts(const Object& in) {
  InputFacts f;
  if (auto tc = in.object("toolchain")) {
    if (auto py = tc->object("python")) {
      f.python.emplace();
      py->read("abi_tag", f.python->abi_tag);
      py->read("ext_suffix", f.python->ext_suffix);
    }
    if (auto torch = tc->object("torch")) {
      f.torch.emplace();
      torch->read("file", f.torch->file);
      torch->read("sha256", f.torch->sha256);
    }
    if (auto cuda = tc->object("cuda")) f.cuda = read_cuda(*cuda);
  }
  if (auto target = in.object("target"))
    if (auto cuda = target->object("cuda")) cuda->read("version", f.target_cuda);
  if (auto package = in.object("package")) {
    if (auto source = package->object("source")) {
      f.source.emplace();
      source->read("file", f.source->file);
      source->read("sha256", f.source->sha256);
    }
    package->read("extra_dependencies", f.extra_dependencies);
  }
  return f;
}

BuiltTools read_tools(const Object& o) {
  BuiltTools t;
  o.read("nvcc", t.nvcc);
  o.read("cxx", t.cxx);
  o.read("python", t.python);
  o.read("ld", t.ld);
  o.read("glibc", t.glibc);
  o.read("cuda_include", t.cuda_include);
  if (auto torch = o.object("torch")) {
    torch->read("version", t.torch.version);
    torch->read("cuda", t.torch.cuda);
    torch->read("cxx11_abi", t.torch.cxx11_abi);
    torch->read("abi_flags", t.torch.abi_flags);
    torch->read("sha256", t.torch.sha256);
  }
  return t;
}

RebuildRecipe read_rebuild(const Object& o) {
  RebuildRecipe r;
  o.read("kiln_commit", r.kiln_commit);
  if (auto source = o.object("source")) {
    source->read("url", r.source_url);
    source->read("size", r.source_size);
  }
  o.read("torch_index_url", r.torch_index_url);
  std::optional<std::vector<RebuildRecipe::Patch>> patches;
  o.read("patches", patches, [](const Object& e) {
    RebuildRecipe::Patch patch;
    e.read("name", patch.name);
    e.read("sha256", patch.sha256);
    std::string text;
    e.read("base64", text);
    auto bytes = base64_decode(text);
    if (!bytes) raise(Error::bad_input(cat("kiln.json: ", e.at("base64"), " is not base64")));
    patch.bytes = std::move(*bytes);
    return patch;
  });
  if (patches) r.patches = std::move(*patches);
  return r;
}

Provenance read_provenance(const json& j) {
  if (!j.is_object()) raise(Error::bad_input(cat("kiln.json is ", a_type(j), ", not an object")));
  Object top(j, "");
  Provenance p;
  top.read("kiln", p.kiln);
  top.read("format", p.format);
  top.read("recipe", p.recipe);
  top.read("build_key", p.build_key);
  top.read("backend", p.backend);
  if (auto inputs = top.object("inputs")) {
    p.facts = read_facts(*inputs);
    p.inputs = *top.get("inputs");
  }
  top.read("archs", p.archs);
  if (auto tools = top.object("tools")) p.tools = read_tools(*tools);
  if (auto platform = top.object("platform")) {
    p.platform.emplace();
    platform->read("tag", p.platform->tag);
    platform->read("limited_by", p.platform->limited_by);
    platform->read("highest", p.platform->highest);
    platform->read("needs", p.platform->needs);
  }
  if (auto st = top.object("setuptools")) {
    p.setuptools.emplace();
    st->read("built_wheel", p.setuptools->built_wheel);
    st->read("torch_cuda_arch_list", p.setuptools->torch_cuda_arch_list);
  }
  if (auto rebuild = top.object("rebuild")) p.rebuild = read_rebuild(*rebuild);
  top.read("caveats", p.caveats);
  return p;
}

json rebuild_json(const RebuildRecipe& r) {
  json patches = json::array();
  for (const auto& patch : r.patches)
    patches.push_back(
        {{"name", patch.name}, {"sha256", patch.sha256}, {"base64", base64_encode(patch.bytes)}});
  json source = json::object();
  if (!r.source_url.empty()) source["url"] = r.source_url;
  if (r.source_size) source["size"] = *r.source_size;
  return {{"kiln_commit", r.kiln_commit},
          {"source", source},
          {"torch_index_url", r.torch_index_url},
          {"patches", patches}};
}

}  // namespace

json to_json(const Provenance& p) {
  json j = {{"kiln", p.kiln},
            {"recipe", p.recipe},
            {"build_key", p.build_key},
            {"backend", p.backend},
            {"inputs", p.inputs}};
  const bool format2 = p.format >= 2;  // format 1 files read back to the same bytes
  if (format2) j["format"] = p.format;
  if (p.archs) j["archs"] = *p.archs;
  if (p.tools) {
    const BuiltTorch& t = p.tools->torch;
    j["tools"] = {{"nvcc", p.tools->nvcc},
                  {"cxx", p.tools->cxx},
                  {"python", p.tools->python},
                  {"torch",
                   {{"version", t.version},
                    {"cuda", t.cuda},
                    {"cxx11_abi", t.cxx11_abi},
                    {"abi_flags", t.abi_flags},
                    {"sha256", t.sha256}}}};
    if (format2) {
      j["tools"]["ld"] = p.tools->ld;
      j["tools"]["glibc"] = p.tools->glibc;
      j["tools"]["cuda_include"] = p.tools->cuda_include;
    }
  }
  if (p.platform) {
    j["platform"] = {{"tag", p.platform->tag},
                     {"limited_by", p.platform->limited_by},
                     {"highest", p.platform->highest}};
    if (!p.platform->needs.empty()) j["platform"]["needs"] = p.platform->needs;
  }
  if (p.setuptools)
    j["setuptools"] = {{"built_wheel", p.setuptools->built_wheel},
                       {"torch_cuda_arch_list", p.setuptools->torch_cuda_arch_list}};
  if (p.rebuild) j["rebuild"] = rebuild_json(*p.rebuild);
  if (!p.caveats.empty()) j["caveats"] = p.caveats;
  return j;
}

std::string provenance_text(const Provenance& p) {
  return to_json(p).dump(2) + "\n";
}

Expected<Provenance> provenance_from_json(const json& j) {
  try {
    return read_provenance(j);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<Provenance> parse_provenance(std::string_view text) {
  json j = parse_json(text);
  if (j.is_discarded()) return Error::bad_input("kiln.json is not valid JSON");
  return provenance_from_json(j);
}

bool says_not_sandboxed(const std::vector<std::string>& caveats) {
  return std::any_of(caveats.begin(), caveats.end(),
                     [](const std::string& c) { return c.starts_with(kNotSandboxed); });
}

}  // namespace kiln::wheel
