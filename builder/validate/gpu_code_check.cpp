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

// The device code of every ELF file that has some, as the "gpu-code" check found it.
struct DeviceScan {
  std::vector<DeviceCode> code;                     // in the order of the wheel's ELF files
  std::set<std::string> all_sass, all_ptx;          // across every file
  nlohmann::json files = nlohmann::json::object();  // the check's data: path -> what it holds
};

// The archs the wheel must hold code for, and where they came from (for messages).
struct Requested {
  std::optional<manifest::ArchList> archs;
  std::string from;
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

// Code names in arch order ("sm_90", "sm_90a", "sm_120"), not the set's string order, which would
// put sm_120 before sm_90.
std::vector<std::string> by_arch(const std::set<std::string>& names) {
  std::vector<std::string> v(names.begin(), names.end());
  std::sort(v.begin(), v.end(), [](const std::string& a, const std::string& b) {
    auto num = [](const std::string& x) { return std::atoi(x.c_str() + x.find('_') + 1); };
    return num(a) != num(b) ? num(a) < num(b) : a < b;
  });
  return v;
}

// "13.0" -> 130; 0 when it does not read.
int cuda_number(const std::string& version) {
  auto parts = split(version, ".");
  if (parts.empty() || parts[0].empty()) return 0;
  int major = std::atoi(parts[0].c_str());
  int minor = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  return major > 0 && minor >= 0 && minor < 10 ? major * 10 + minor : 0;
}

std::string cuda_name(int number) {
  return cat(number / 10, ".", number % 10);
}

// --archs (or a target's) when given, else the archs the provenance records, else none.
Requested requested_archs(const LoadedWheel& w, const Options& options) {
  Requested r{options.archs, options.archs_from};
  if (!r.archs && w.provenance && w.provenance->archs) {
    auto parsed = manifest::ArchList::parse(spec_of_canonical(*w.provenance->archs));
    if (parsed) {
      r.archs = *parsed;
      r.from = "provenance";
    }
  }
  return r;
}

// A wheel without ELF files: skipped, unless archs were requested for this very wheel (--archs or
// its provenance; a target's archs do not make a pure wheel built for that target wrong).
std::vector<CheckResult> without_binaries(const Requested& requested, const Options& options) {
  std::vector<CheckResult> out;
  if (requested.archs && !requested.archs->empty() && !requested.from.starts_with("target ")) {
    Findings f("gpu-code");
    f.fail(cat("no ELF files, but ", requested.archs->canonical(), " was requested (",
               requested.from, ")"));
    out.push_back(f.finish(""));
    if (options.gpu) out.push_back(skipped("gpu-target", "no ELF files"));
    return out;
  }
  out.push_back(skipped("gpu-code", "no ELF files (a pure wheel)"));
  if (options.gpu) out.push_back(skipped("gpu-target", "no ELF files (a pure wheel)"));
  return out;
}

// Each cubin (decompressed where needed) must be for the arch its entry header names.
void check_cubin_archs(const Binary& b, std::string_view section, const DeviceCode& dc,
                       Findings& f) {
  for (const auto& e : dc.entries) {
    if (e.kind != fatbin::Kind::Elf) continue;
    auto cubin = fatbin::payload(section, e);
    auto sm = cubin ? fatbin::cubin_arch(*cubin) : Expected<int>(cubin.error());
    if (!sm)
      f.fail(cat(b.path, ": ", e.code_name(), ": ", sm.error().message));
    else if (*sm != e.arch)
      f.fail(
          cat(b.path, ": the fatbin entry says ", e.code_name(), " but its cubin is for sm_", *sm));
  }
}

// Sorts the entries into SASS and PTX names; returns them as the check's data lists them.
nlohmann::json sort_entries(DeviceCode& dc) {
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
  return entries;
}

// One ELF file's .nv_fatbin, if it has one: its entries into `scan`, its problems into `f`. A file
// whose fat binary cannot be read is a failure and holds no device code as far as `scan` goes.
void scan_binary(const Binary& b, Findings& f, DeviceScan& scan) {
  const elf::Section* s = b.info.section(".nv_fatbin");
  if (!s) return;
  auto bytes = elf::section_bytes(b.data, *s);
  if (!bytes) {
    f.fail(cat(b.path, ": .nv_fatbin lies outside the file"));
    return;
  }
  auto parsed = fatbin::parse(*bytes, b.path);
  if (!parsed) {
    f.fail(parsed.error().message);
    return;
  }
  DeviceCode dc;
  dc.path = b.path;
  dc.entries = fatbin::all_entries(*parsed);
  check_cubin_archs(b, *bytes, dc, f);
  nlohmann::json entries = sort_entries(dc);
  scan.all_sass.insert(dc.sass.begin(), dc.sass.end());
  scan.all_ptx.insert(dc.ptx.begin(), dc.ptx.end());
  scan.files[b.path] = {{"sass", std::vector<std::string>(dc.sass.begin(), dc.sass.end())},
                        {"ptx", std::vector<std::string>(dc.ptx.begin(), dc.ptx.end())},
                        {"containers", parsed->size()},
                        {"entries", std::move(entries)}};
  scan.code.push_back(std::move(dc));
}

// Every file with device code must hold exactly the requested SASS and PTX: a missing arch fails
// at load on that GPU, an unexpected one means the build did not use the archs it was given.
void compare_with_requested(const DeviceScan& scan, const Requested& requested, Findings& f) {
  const std::string asked = requested.archs->canonical();
  std::set<std::string> want_sass, want_ptx;
  for (const auto& a : requested.archs->archs()) {
    if (a.sass) want_sass.insert(a.sm_name());
    if (a.ptx) want_ptx.insert(a.compute_name());
  }
  if (scan.code.empty() && (!want_sass.empty() || !want_ptx.empty()))
    f.fail(cat("no ELF file holds device code (.nv_fatbin), but ", asked, " was requested (",
               requested.from, ")"));
  for (const auto& dc : scan.code) {
    for (const auto& s : want_sass)
      if (!dc.sass.count(s))
        f.fail(cat(dc.path, " has no SASS for ", s, " (requested: ", asked, ")"));
    for (const auto& p : want_ptx)
      if (!dc.ptx.count(p)) f.fail(cat(dc.path, " has no PTX ", p, " (requested: ", asked, ")"));
    for (const auto& s : dc.sass)
      if (!want_sass.count(s))
        f.fail(cat(dc.path, " has unexpected SASS for ", s, " (requested: ", asked, ")"));
    for (const auto& p : dc.ptx)
      if (!want_ptx.count(p))
        f.fail(cat(dc.path, " has unexpected PTX ", p, " (requested: ", asked, ")"));
  }
}

// "gpu-target": each file with device code runs on `gpu` through SASS (preferred: the first entry
// that runs), else by JIT-compiling the newest PTX that runs there (a warning: it costs start-up
// time), else not at all.
CheckResult check_gpu_target(const DeviceScan& scan, const manifest::Arch& gpu, int driver) {
  std::string gpu_name = cat("sm_", gpu.number());
  Findings g("gpu-target");
  g.data()["gpu"] = gpu_name;
  nlohmann::json how = nlohmann::json::object();
  bool any_ptx = false;
  if (scan.code.empty()) g.fail(cat("no device code in the wheel, so nothing runs on ", gpu_name));
  for (const auto& dc : scan.code) {
    std::string sass, ptx, too_new;
    for (const auto& e : dc.entries) {
      std::string r = runs_as(e, gpu);
      if (r == "sass" && sass.empty()) sass = e.code_name();
      if (r == "ptx" && driver && ptx_isa_cuda(e.version_major, e.version_minor) > driver) {
        too_new = cat(" (PTX ", e.code_name(), " is ISA ", e.version_major, ".", e.version_minor,
                      ", which needs a driver for CUDA ",
                      cuda_name(ptx_isa_cuda(e.version_major, e.version_minor)),
                      "; this driver supports CUDA ", cuda_name(driver), ")");
        continue;
      }
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
          dc.sass.empty() ? std::string("no SASS") : cat("SASS for ", join(by_arch(dc.sass), ", ")),
          " and ",
          dc.ptx.empty() ? std::string("no PTX") : cat("PTX ", join(by_arch(dc.ptx), ", ")),
          ", none usable there (\"no kernel image is available for execution on the device\")",
          too_new));
    }
  }
  g.data()["files"] = std::move(how);
  return g.finish(cat("runs on ", gpu_name, any_ptx ? " (via PTX JIT)" : " (SASS present)"));
}

// "ptx-jit": every PTX entry is of an ISA the driver can JIT-compile (a newer one fails with
// CUDA_ERROR_UNSUPPORTED_PTX_VERSION when no SASS covers the GPU).
CheckResult check_ptx_jit(const DeviceScan& scan, int driver) {
  Findings f("ptx-jit");
  f.data()["driver_cuda"] = cuda_name(driver);
  std::size_t count = 0;
  int newest = 0;
  for (const auto& dc : scan.code)
    for (const auto& e : dc.entries) {
      if (e.kind != fatbin::Kind::Ptx) continue;
      ++count;
      int needs = ptx_isa_cuda(e.version_major, e.version_minor);
      newest = std::max(newest, needs);
      if (needs > driver)
        f.warn(cat(dc.path, ": PTX ", e.code_name(), " is ISA ", e.version_major, ".",
                   e.version_minor, " (CUDA ", cuda_name(needs), "), newer than this driver (CUDA ",
                   cuda_name(driver), ") can JIT-compile"));
    }
  if (count == 0) return skipped("ptx-jit", "no PTX (nothing to JIT-compile)");
  return f.finish(cat(count, " PTX entr", count == 1 ? "y" : "ies", " (up to CUDA ",
                      cuda_name(newest), "): the driver (CUDA ", cuda_name(driver),
                      ") can JIT-compile them"));
}

}  // namespace

int ptx_isa_cuda(int major, int minor) {
  if (major <= 0 || minor < 0) return 0;
  if (major < 6) return 80;  // CUDA 8 and older: any driver kiln meets JIT-compiles it
  if (major == 6) return minor <= 2 ? 90 + minor : 100 + (minor - 3);  // 6.3: 10.0 ... 6.5: 10.2
  if (major == 7) return 110 + minor;                                  // 7.0: 11.0 ... 7.8: 11.8
  if (major == 8) return minor <= 5 ? 120 + minor : 121 + minor;  // 8.5: 12.5, 8.6: 12.7, 8.8: 12.9
  return (major + 4) * 10 + minor;                                // 9.0: 13.0, 9.1: 13.1
}

std::vector<CheckResult> check_gpu_code(const LoadedWheel& w, const Options& options) {
  if (!w.readable()) {
    std::vector<CheckResult> out = {skipped("gpu-code", "the archive is unreadable")};
    if (options.gpu) out.push_back(skipped("gpu-target", "the archive is unreadable"));
    return out;
  }
  const Requested requested = requested_archs(w, options);
  if (w.binaries.empty()) return without_binaries(requested, options);

  Findings f("gpu-code");
  DeviceScan scan;
  for (const auto& b : w.binaries) scan_binary(b, f, scan);
  f.data()["sass"] = by_arch(scan.all_sass);
  f.data()["ptx"] = by_arch(scan.all_ptx);
  f.data()["files"] = std::move(scan.files);
  f.data()["requested"] = requested.archs ? requested.archs->canonical() : "";
  f.data()["requested_from"] = requested.archs ? requested.from : "";

  std::string found =
      cat("SASS ", scan.all_sass.empty() ? std::string("none") : join(by_arch(scan.all_sass), ", "),
          "; PTX ", scan.all_ptx.empty() ? std::string("none") : join(by_arch(scan.all_ptx), ", "));
  std::vector<CheckResult> out;
  if (requested.archs) {
    compare_with_requested(scan, requested, f);
    out.push_back(f.finish(cat(found, ": exactly the requested ", requested.archs->canonical(),
                               " (", requested.from, ")")));
  } else {
    out.push_back(f.finish(cat(found, " (no requested archs to compare with: give --archs)")));
  }
  int driver = cuda_number(options.driver_cuda);
  if (options.gpu) out.push_back(check_gpu_target(scan, *options.gpu, driver));
  if (driver) out.push_back(check_ptx_jit(scan, driver));
  return out;
}

}  // namespace kiln::validate
