// Checks "gpu-code" and "gpu-target": the SASS and PTX embedded in each ELF file's .nv_fatbin
// against the requested archs (missing and unexpected ones), and whether the wheel runs on a
// given GPU: SASS of the same major arch with minor <= the GPU's (exact for a/f variants), or PTX
// of an arch <= the GPU's, JIT-compiled at load (exact for a/f variants).
#include <algorithm>
#include <set>

#include "core/strings.h"
#include "fatbin/fatbin.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace {

struct DeviceCode {
  std::string path;
  std::vector<fatbin::Entry> entries;
  std::set<std::string> sass, ptx;  // "sm_90a", "compute_120"
};

// How `e` runs on `gpu` (a device: major.minor), or "" when it does not.
std::string runs_as(const fatbin::Entry& e, const manifest::Arch& gpu) {
  int major = e.arch / 10, minor = e.arch % 10;
  if (e.kind == fatbin::Kind::Elf) {
    if (e.variant) return major == gpu.major && minor == gpu.minor ? "sass" : "";
    return major == gpu.major && minor <= gpu.minor ? "sass" : "";
  }
  if (e.kind == fatbin::Kind::Ptx) {
    if (e.variant) return major == gpu.major && minor == gpu.minor ? "ptx" : "";
    return e.arch <= gpu.number() ? "ptx" : "";
  }
  return "";
}

// ArchList::canonical() writes "sm_90;sm_120+ptx", which ArchList::parse does not read back:
// spell "+ptx" tokens as the SASS and compute_ pair they mean.
std::string spec_of_canonical(const std::string& canonical) {
  std::vector<std::string> out;
  for (const auto& token : split(canonical, ";")) {
    static const std::string plus = "+ptx";
    if (token.size() > plus.size() &&
        token.compare(token.size() - plus.size(), plus.size(), plus) == 0 &&
        token.rfind("sm_", 0) == 0) {
      std::string sm = token.substr(0, token.size() - plus.size());
      out.push_back(sm);
      out.push_back("compute_" + sm.substr(3));
    } else {
      out.push_back(token);
    }
  }
  return join(out, ";");
}

}  // namespace

std::vector<CheckResult> check_gpu_code(const LoadedWheel& w, const Options& options) {
  std::vector<CheckResult> out;
  auto skip_all = [&](const std::string& why) {
    out.push_back(skipped("gpu-code", why));
    if (options.gpu) out.push_back(skipped("gpu-target", why));
    return out;
  };
  if (!w.zip) return skip_all("the archive is unreadable");

  // Requested archs: --archs, else the provenance's.
  std::optional<manifest::ArchList> requested = options.archs;
  std::string requested_from = options.archs_from;
  if (!requested && w.provenance.is_object() && w.provenance.contains("archs") &&
      w.provenance["archs"].is_string()) {
    auto parsed =
        manifest::ArchList::parse(spec_of_canonical(w.provenance["archs"].get<std::string>()));
    if (parsed) {
      requested = *parsed;
      requested_from = "provenance";
    }
  }
  if (w.binaries.empty()) {
    if (requested && !requested->empty() && !requested_from.starts_with("target ")) {
      Findings f("gpu-code");
      f.fail(cat("no ELF files, but ", requested->canonical(), " was requested (", requested_from,
                 ")"));
      out.push_back(f.finish(""));
      if (options.gpu) out.push_back(skipped("gpu-target", "no ELF files"));
      return out;
    }
    return skip_all("no ELF files (a pure wheel)");
  }

  Findings f("gpu-code");
  std::vector<DeviceCode> code;
  std::set<std::string> all_sass, all_ptx;
  nlohmann::json files = nlohmann::json::object();
  for (const auto& b : w.binaries) {
    const elf::Section* s = b.info.section(".nv_fatbin");
    if (!s) continue;
    auto bytes = elf::section_bytes(b.data, *s);
    if (!bytes) {
      f.fail(cat(b.path, ": .nv_fatbin lies outside the file"));
      continue;
    }
    auto parsed = fatbin::parse(*bytes, b.path);
    if (!parsed) {
      f.fail(parsed.error().message);
      continue;
    }
    DeviceCode dc;
    dc.path = b.path;
    dc.entries = fatbin::all_entries(*parsed);
    // Each cubin (decompressed where needed) must be for the arch its entry header names.
    for (const auto& e : dc.entries) {
      if (e.kind != fatbin::Kind::Elf) continue;
      auto cubin = fatbin::payload(*bytes, e);
      auto sm = cubin ? fatbin::cubin_arch(*cubin) : Expected<int>(cubin.error());
      if (!sm)
        f.fail(cat(b.path, ": ", e.code_name(), ": ", sm.error().message));
      else if (*sm != e.arch)
        f.fail(cat(b.path, ": the fatbin entry says ", e.code_name(), " but its cubin is for sm_",
                   *sm));
    }
    nlohmann::json entries = nlohmann::json::array();
    for (const auto& e : dc.entries) {
      if (e.kind == fatbin::Kind::Elf)
        dc.sass.insert(e.code_name());
      else if (e.kind == fatbin::Kind::Ptx)
        dc.ptx.insert(e.code_name());
      nlohmann::json je = {{"kind", fatbin::kind_name(e.kind)},
                           {"arch", e.arch_name()},
                           {"version", cat(e.version_major, ".", e.version_minor)},
                           {"compression", fatbin::compression_name(e.compression)}};
      if (!e.object_name.empty()) je["object"] = e.object_name;
      entries.push_back(std::move(je));
    }
    all_sass.insert(dc.sass.begin(), dc.sass.end());
    all_ptx.insert(dc.ptx.begin(), dc.ptx.end());
    files[b.path] = {{"sass", std::vector<std::string>(dc.sass.begin(), dc.sass.end())},
                     {"ptx", std::vector<std::string>(dc.ptx.begin(), dc.ptx.end())},
                     {"containers", parsed->size()},
                     {"entries", std::move(entries)}};
    code.push_back(std::move(dc));
  }
  auto sorted = [](const std::set<std::string>& s) {
    std::vector<std::string> v(s.begin(), s.end());
    std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
      auto num = [](const std::string& x) { return std::atoi(x.c_str() + x.find('_') + 1); };
      return num(a) != num(b) ? num(a) < num(b) : a < b;
    });
    return v;
  };
  f.data()["sass"] = sorted(all_sass);
  f.data()["ptx"] = sorted(all_ptx);
  f.data()["files"] = std::move(files);
  f.data()["requested"] = requested ? requested->canonical() : "";
  f.data()["requested_from"] = requested ? requested_from : "";

  std::string found =
      cat("SASS ", all_sass.empty() ? std::string("none") : join(sorted(all_sass), ", "), "; PTX ",
          all_ptx.empty() ? std::string("none") : join(sorted(all_ptx), ", "));
  if (requested) {
    std::set<std::string> want_sass, want_ptx;
    for (const auto& a : requested->archs()) {
      if (a.sass) want_sass.insert(a.sm_name());
      if (a.ptx) want_ptx.insert(a.compute_name());
    }
    if (code.empty() && (!want_sass.empty() || !want_ptx.empty()))
      f.fail(cat("no ELF file holds device code (.nv_fatbin), but ", requested->canonical(),
                 " was requested (", requested_from, ")"));
    for (const auto& dc : code) {
      for (const auto& s : want_sass)
        if (!dc.sass.count(s))
          f.fail(
              cat(dc.path, " has no SASS for ", s, " (requested: ", requested->canonical(), ")"));
      for (const auto& p : want_ptx)
        if (!dc.ptx.count(p))
          f.fail(cat(dc.path, " has no PTX ", p, " (requested: ", requested->canonical(), ")"));
      for (const auto& s : dc.sass)
        if (!want_sass.count(s))
          f.fail(cat(dc.path, " has unexpected SASS for ", s,
                     " (requested: ", requested->canonical(), ")"));
      for (const auto& p : dc.ptx)
        if (!want_ptx.count(p))
          f.fail(cat(dc.path, " has unexpected PTX ", p, " (requested: ", requested->canonical(),
                     ")"));
    }
    out.push_back(f.finish(
        cat(found, ": exactly the requested ", requested->canonical(), " (", requested_from, ")")));
  } else {
    out.push_back(f.finish(cat(found, " (no requested archs to compare with: give --archs)")));
  }

  if (options.gpu) {
    const manifest::Arch& gpu = *options.gpu;
    std::string gpu_name = cat("sm_", gpu.number());
    Findings g("gpu-target");
    g.data()["gpu"] = gpu_name;
    nlohmann::json how = nlohmann::json::object();
    bool any_ptx = false;
    if (code.empty()) g.fail(cat("no device code in the wheel, so nothing runs on ", gpu_name));
    for (const auto& dc : code) {
      std::string sass, ptx;
      for (const auto& e : dc.entries) {
        std::string r = runs_as(e, gpu);
        if (r == "sass" && sass.empty()) sass = e.code_name();
        if (r == "ptx" && (ptx.empty() || e.arch > std::atoi(ptx.c_str() + 8))) ptx = e.code_name();
      }
      if (!sass.empty()) {
        how[dc.path] = {{"runs", true}, {"via", "sass"}, {"code", sass}};
      } else if (!ptx.empty()) {
        any_ptx = true;
        how[dc.path] = {{"runs", true}, {"via", "ptx"}, {"code", ptx}};
        g.warn(cat(dc.path, " runs on ", gpu_name, " only by JIT-compiling PTX ", ptx,
                   " at load (costs start-up time; add SASS for ", gpu_name, " to avoid it)"));
      } else {
        how[dc.path] = {{"runs", false}};
        g.fail(cat(
            dc.path, " will not run on ", gpu_name, ": it has ",
            dc.sass.empty() ? std::string("no SASS")
                            : cat("SASS for ", join(sorted(dc.sass), ", ")),
            " and ",
            dc.ptx.empty() ? std::string("no PTX") : cat("PTX ", join(sorted(dc.ptx), ", ")),
            ", none usable there (\"no kernel image is available for execution on the device\")"));
      }
    }
    g.data()["files"] = std::move(how);
    out.push_back(
        g.finish(cat("runs on ", gpu_name, any_ptx ? " (via PTX JIT)" : " (SASS present)")));
  }
  return out;
}

}  // namespace kiln::validate
