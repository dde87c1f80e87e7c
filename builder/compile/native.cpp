#include "compile/native.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "compile/nvcc_split.h"
#include "core/clock.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/process.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {

// torch.utils.cpp_extension's nvcc defaults.
const std::vector<std::string> kCommonNvccFlags = {
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr"};

// The host flags cpp_extension takes from Python's sysconfig, without -g: kiln ships no host
// debug info (smaller wheels, faster compiles, nothing path-dependent).
const std::vector<std::string> kCommonCxxFlags = {
    "-fno-strict-overflow", "-Wsign-compare", "-DNDEBUG", "-O2", "-Wall", "-fPIC"};

bool has_std_flag(const std::vector<std::string>& flags) {
  return std::any_of(flags.begin(), flags.end(), [](const std::string& f) {
    return f.rfind("-std=", 0) == 0 || f.rfind("--std=", 0) == 0 || f == "-std";
  });
}

std::vector<std::string> include_flags(const NativeContext& ctx, const manifest::Extension& ext) {
  std::vector<std::string> flags;
  for (const auto& dir : ext.include_dirs)
    flags.push_back("-I" + (ctx.root / "src" / dir).string());
  // Through the fixed root, so recorded header paths do not depend on the cache's location.
  flags.push_back("-I" + (ctx.root / "torch" / "include").string());
  flags.push_back("-I" +
                  (ctx.root / "torch" / "include" / "torch" / "csrc" / "api" / "include").string());
  flags.push_back("-I" + (ctx.root / "cuda" / "include").string());
  flags.push_back("-I" + (ctx.root / "python").string());
  return flags;
}

std::vector<std::string> define_flags(const manifest::Extension& ext) {
  std::vector<std::string> flags;
  for (const auto& m : ext.define_macros) flags.push_back("-D" + m);
  return flags;
}

std::vector<std::string> extension_defines(const NativeContext& ctx,
                                           const manifest::Extension& ext) {
  std::vector<std::string> flags = {
      "-DTORCH_API_INCLUDE_EXTENSION_H",
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
    log::warn(
        "cannot run nvcc in a PID namespace (unshare --pid): objects whose code uses anonymous "
        "namespaces will differ between builds");
    return std::vector<std::string>{};
  }();
  return prefix;
}

// The compile and link argv kiln uses.
std::vector<std::string> cxx_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                          const std::vector<std::string>& defines,
                                          const std::string& source, const std::string& object) {
  std::vector<std::string> argv = {ctx.cxx.path};
  append(argv, kCommonCxxFlags);
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  append(argv, defines);
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, ext.cxx_flags);
  append(argv, extension_defines(ctx, ext));
  if (!has_std_flag(ext.cxx_flags)) argv.push_back("-std=c++17");
  return argv;
}

}  // namespace

// fatbinary compresses only large SASS images by default (a 9 MB cubin stays as it is, a 15 MB
// one shrinks 5.6x), so the wheel's size would depend on how the code is split into translation
// units; -compress-all compresses every image, with the default (balanced) mode: the "size" mode
// saves another 30% at about 0.75 CPU-s per MB of SASS, more than a sharded compile saves.
const std::vector<std::string> kFatbinaryFlags = {"-compress-all"};

namespace {

// A shard's defines: -D<index>=k -D<count>=n (none when n is 1).
std::vector<std::string> shard_defines(const manifest::Shardable& shard, int index, int count) {
  if (count <= 1) return {};
  return {cat("-D", shard.index_define, "=", index), cat("-D", shard.count_define, "=", count)};
}

}  // namespace

std::vector<std::string> nvcc_flags(const NativeContext& ctx, const manifest::Extension& ext,
                                    const std::vector<std::string>& defines) {
  std::vector<std::string> argv;
  append(argv, include_flags(ctx, ext));
  append(argv, define_flags(ext));
  append(argv, defines);
  append(argv, kCommonNvccFlags);
  argv.push_back("-Xcompiler");
  argv.push_back("-fPIC");
  // GCC swaps a system header's directory (CCCL comes in through -isystem) for its realpath when
  // that is shorter: the toolkit's install or cache location would end up in line info. Keep the
  // path nvcc was given (through the build root's cuda/ link).
  if (ctx.cxx.version_text.find("clang") == std::string::npos) {
    argv.push_back("-Xcompiler");
    argv.push_back("-fno-canonical-system-headers");
  }
  append(argv, ext.nvcc_flags);
  append(argv, extension_defines(ctx, ext));
  if (!has_std_flag(ext.nvcc_flags)) argv.push_back("-std=c++17");
  argv.push_back("-ccbin");
  argv.push_back(ctx.cxx.path);
  return argv;
}

// nvcc finds its tools and headers relative to the path it is run as: through the build root's
// fixed cuda/ view, the paths it records are the same wherever the toolkit is installed (or
// unpacked into a cache).
std::string nvcc_path(const NativeContext& ctx) {
  return (ctx.root / "cuda" / "bin" / "nvcc").string();
}

namespace {

// One nvcc for all archs (where kiln does not split the file per arch).
std::vector<std::string> nvcc_compile_argv(const NativeContext& ctx, const manifest::Extension& ext,
                                           const std::vector<std::string>& defines,
                                           const std::string& source, const std::string& object,
                                           int threads, const std::string& keep_dir) {
  std::vector<std::string> argv = pid_namespace_prefix();
  argv.push_back(nvcc_path(ctx));
  append(argv, nvcc_flags(ctx, ext, defines));
  argv.push_back("-c");
  argv.push_back(source);
  argv.push_back("-o");
  argv.push_back(object);
  append(argv, ctx.archs.gencode_flags());
  argv.push_back("-Xfatbin=-compress-all");
  argv.push_back("--threads");
  argv.push_back(std::to_string(threads));
  // Named intermediates instead of tmpxft_<pid>_… ones, whose names end up in the object.
  argv.push_back("--keep");
  argv.push_back("--keep-dir");
  argv.push_back(keep_dir);
  return argv;
}

std::vector<std::string> link_argv(const NativeContext& ctx,
                                   const std::vector<std::string>& objects,
                                   const std::string& output) {
  std::vector<std::string> argv = {ctx.cxx.path, "-shared", "-Wl,-O1", "-Wl,--as-needed"};
  append(argv, objects);
  argv.push_back("-L" + (ctx.root / "torch" / "lib").string());
  argv.push_back("-L" + (ctx.root / "cuda" / "lib64").string());
  for (const auto& lib : toolchain::torch_link_libraries()) argv.push_back("-l" + lib);
  argv.push_back("-o");
  argv.push_back(output);
  return argv;
}

// A device part in the object cache: the files it made, each as "<path>\n<size>\n<bytes>".
std::string pack_files(const std::vector<std::pair<fs::path, std::string>>& files) {
  std::string out = "kiln-device-part 1\n";
  for (const auto& [path, data] : files) out += cat(path.string(), "\n", data.size(), "\n", data);
  return out;
}

Expected<std::vector<std::pair<fs::path, std::string>>> unpack_files(std::string_view data) {
  std::vector<std::pair<fs::path, std::string>> files;
  auto line = [&](std::string& out) {
    auto nl = data.find('\n');
    if (nl == std::string_view::npos) return false;
    out = std::string(data.substr(0, nl));
    data.remove_prefix(nl + 1);
    return true;
  };
  std::string header, path, size;
  if (!line(header) || header != "kiln-device-part 1") return Error::failed("not a device part");
  while (!data.empty()) {
    if (!line(path) || !line(size) || size.empty() || size.size() > 12 ||
        !std::all_of(size.begin(), size.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return Error::failed("a damaged device part");
    std::size_t n = std::stoull(size);
    if (n > data.size()) return Error::failed("a truncated device part");
    files.emplace_back(path, std::string(data.substr(0, n)));
    data.remove_prefix(n);
  }
  return files;
}

// cicc and cudafe++ put a hash of the source file's mtime into the module id, which names the
// file's internal entities in host and device code; patched or copied files have the time they
// were written. Every file of the tree gets one fixed time (1980-01-01, as unpacked sdists).
Expected<void> fix_mtimes(const fs::path& tree) {
  ::timespec times[2];
  times[0].tv_sec = times[1].tv_sec = kZipEpoch;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(tree, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    if (::utimensat(AT_FDCWD, it->path().c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
      return Error::failed(
          cat("cannot set the time of ", it->path().string(), ": ", std::strerror(errno)));
  }
  if (ec) return Error::failed(cat("cannot list ", tree.string(), ": ", ec.message()));
  return {};
}

// Every arch of this nvcc, for __CUDA_ARCH_LIST__ (see nvcc_split.h); "" when it cannot say.
std::string canonical_arch_list(const fs::path& nvcc) {
  ProcessSpec spec;
  spec.argv = {nvcc.string(), "--list-gpu-arch"};
  auto r = run_process(spec);
  if (!r || !r->ok()) return "";
  return nvcc::arch_list_value(r->output);
}

// Runs nvcc dry runs, several at a time; each result is its output or an error.
std::vector<Expected<std::string>> run_dry_runs(
    const std::vector<std::vector<std::string>>& commands, const fs::path& cwd) {
  std::vector<Expected<std::string>> results(commands.size(), Error::failed("not run"));
  const std::size_t batch = 32;
  for (std::size_t first = 0; first < commands.size(); first += batch) {
    std::vector<std::pair<std::size_t, Child>> children;
    for (std::size_t i = first; i < std::min(commands.size(), first + batch); ++i) {
      ProcessSpec spec;
      spec.argv = commands[i];
      spec.cwd = cwd;
      auto child = spawn(spec);
      if (!child)
        results[i] = child.error();
      else
        children.emplace_back(i, std::move(*child));
    }
    for (auto& [i, child] : children) {
      auto r = child.wait();
      if (!r)
        results[i] = r.error();
      else if (!r->ok())
        results[i] = Error::failed(cat("nvcc --dryrun failed: ", tail_lines(r->output, 5)));
      else
        results[i] = std::move(r->output);
    }
  }
  return results;
}

// One translation unit: a source, or one shard of it.
struct Unit {
  const manifest::Extension* ext = nullptr;
  std::string source;                // relative to src/
  std::vector<std::string> defines;  // the shard's
  std::string tag;                   // "csrc_x.cu" or "csrc_x.cu.2-of-9": names its files
  std::string name;                  // "x.cu" or "x.cu[2/9]": names its jobs
  double share = 1;                  // its part of the source's units
  bool sharded = false;              // the source is declared shardable
  fs::path object;
  fs::path fatbin_object;  // a CUDA unit's fat binary, when its host part is split off
};

// What a CUDA unit becomes when nvcc's dry run splits per arch.
struct SplitUnit {
  std::vector<nvcc::DevicePart> devices;  // one per arch, in the target's order
  std::vector<std::string> device_labels;
  nvcc::HostPart host;
  nvcc::DevicePart front;  // the lowest arch's front end: the host part's stub and module id
  nvcc::Env env;
};

std::string join_commands(const std::vector<std::vector<std::string>>& steps) {
  std::vector<std::string> lines;
  for (const auto& s : steps) lines.push_back(join(s, "\x1f"));
  return join(lines, "\x1e");
}

std::vector<std::vector<std::string>> in_pid_namespace(
    std::vector<std::vector<std::string>> steps) {
  for (auto& s : steps)
    s.insert(s.begin(), pid_namespace_prefix().begin(), pid_namespace_prefix().end());
  return steps;
}

}  // namespace

Expected<NativeResult> build_native(const NativeContext& ctx) {
  NativeResult result;
  const int slots = ctx.jobs > 0 ? ctx.jobs : default_slots();
  // The fixed views the flags refer to.
  for (const auto& [link, target] :
       {std::pair<std::string, fs::path>{"torch", ctx.torch.root},
        std::pair<std::string, fs::path>{"python", ctx.python.include_dir},
        std::pair<std::string, fs::path>{"cuda", ctx.cuda.home}}) {
    std::error_code ec;
    fs::remove(ctx.root / link, ec);
    fs::create_directory_symlink(target, ctx.root / link, ec);
    if (ec)
      return Error::failed(cat("cannot link ", (ctx.root / link).string(), ": ", ec.message()));
  }
  KILN_CHECK(ensure_directory(ctx.root / "obj"));
  KILN_CHECK(ensure_directory(ctx.root / "out"));
  KILN_CHECK(ensure_directory(ctx.object_cache));
  KILN_CHECK(fix_mtimes(ctx.root / "src"));

  // The translation units, in link order.
  std::vector<Unit> units;
  for (const auto& ext : ctx.manifest->extensions) {
    for (const auto& src : ext.sources) {
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
        u.share = count > 1
                      ? static_cast<double>((shard->units - k + count - 1) / count) / shard->units
                      : 1.0;
        u.sharded = shard != nullptr;
        u.object = ctx.root / "obj" / (ext.name + "." + u.tag + ".o");
        units.push_back(std::move(u));
      }
    }
  }

  // nvcc's dry runs for the CUDA units: one per arch (device part) and one for all (host part).
  std::vector<std::string> arch_tokens = split(ctx.archs.canonical(), ";");
  std::vector<manifest::ArchList> arch_entries;
  for (const auto& token : arch_tokens)
    arch_entries.push_back(manifest::ArchList::parse(token).value());
  const std::string arch_list = canonical_arch_list(ctx.cuda.nvcc);
  std::vector<std::vector<std::string>> dry_commands;
  std::vector<std::size_t> dry_first(units.size(), 0);
  auto keep_dir = [&](const Unit& u) { return ctx.root / "keep" / (u.ext->name + "." + u.tag); };
  auto arch_dir = [](const std::string& token) {
    std::string d = token;
    std::replace(d.begin(), d.end(), '+', '-');
    return d;
  };
  for (std::size_t i = 0; i < units.size(); ++i) {
    const Unit& u = units[i];
    dry_first[i] = dry_commands.size();
    if (!u.source.ends_with(".cu") || arch_list.empty()) continue;
    std::string source = (ctx.root / "src" / u.source).string();
    std::string stem = fs::path(u.source).stem().string();
    for (std::size_t a = 0; a < arch_entries.size(); ++a) {
      fs::path dir = keep_dir(u) / arch_dir(arch_tokens[a]);
      KILN_CHECK(ensure_directory(dir));
      std::vector<std::string> argv = {nvcc_path(ctx), "--dryrun"};
      append(argv, nvcc_flags(ctx, *u.ext, u.defines));
      append(argv, {"--fatbin", source, "-o", (dir / (stem + ".fatbin")).string()});
      append(argv, arch_entries[a].gencode_flags());
      append(argv, {"--keep", "--keep-dir", dir.string()});
      dry_commands.push_back(std::move(argv));
    }
    // The host part from a dry run of the lowest arch alone (nvcc names its intermediates and
    // defines __CUDA_ARCH__ after the last arch: the host part is then the same for every arch
    // set with that lowest arch); the fat binary of all archs from a dry run of all.
    for (const auto& [name, gencodes] : {std::pair{"host", arch_entries.front().gencode_flags()},
                                         std::pair{"fatbin", ctx.archs.gencode_flags()}}) {
      fs::path dir = keep_dir(u) / name;
      KILN_CHECK(ensure_directory(dir));
      std::vector<std::string> argv = {nvcc_path(ctx), "--dryrun"};
      append(argv, nvcc_flags(ctx, *u.ext, u.defines));
      append(argv, {"-c", source, "-o", u.object.string()});
      append(argv, gencodes);
      append(argv, {"--keep", "--keep-dir", dir.string()});
      dry_commands.push_back(std::move(argv));
    }
    fs::path dir = keep_dir(u) / "front";
    KILN_CHECK(ensure_directory(dir));
    std::vector<std::string> argv = {nvcc_path(ctx), "--dryrun"};
    append(argv, nvcc_flags(ctx, *u.ext, u.defines));
    append(argv, {"-Xcicc", "-O0", "--fatbin", source, "-o", (dir / (stem + ".fatbin")).string()});
    append(argv, arch_entries.front().gencode_flags());
    append(argv, {"--keep", "--keep-dir", dir.string()});
    dry_commands.push_back(std::move(argv));
  }
  auto dry_outputs = run_dry_runs(dry_commands, ctx.root / "src");

  struct Planned {
    Job job;
    // 0 host parts and fat binaries (they unblock links), 1 the device parts of shardable
    // sources (the manifest marks those as the heavy ones), 2 host C++, 3 other device parts and
    // whole-file nvcc jobs, 4 front ends, 5 links.
    int order_class;
    double estimate;
  };
  std::vector<Planned> planned;
  const std::vector<std::pair<std::string, std::string>> env = {
      {"SOURCE_DATE_EPOCH", std::to_string(kZipEpoch)}, {"LC_ALL", "C"}};
  auto object_key = [&](std::string_view kind, const std::string& commands) {
    return sha256_hex(cat(ctx.object_salt, "\n", kind, "\n", commands));
  };
  auto cached_path = [&](const std::string& key, std::string_view suffix) {
    return ctx.object_cache / key.substr(0, 2) / (key + std::string(suffix));
  };
  auto store = [](fs::path cached, fs::path object) {
    return [object, cached]() -> Expected<void> {
      KILN_CHECK(ensure_directory(cached.parent_path()));
      KILN_TRY(std::string data, read_file(object));
      return write_file_atomic(cached, data);
    };
  };
  auto reuse = [&](const fs::path& cached, const fs::path& object) {
    std::error_code ec;
    if (!fs::is_regular_file(cached, ec)) return false;
    fs::copy_file(cached, object, fs::copy_options::overwrite_existing, ec);
    if (ec) return false;
    result.objects_reused++;
    return true;
  };
  std::vector<std::vector<std::size_t>> ext_deps(ctx.manifest->extensions.size());
  auto ext_index = [&](const manifest::Extension* e) {
    return static_cast<std::size_t>(e - ctx.manifest->extensions.data());
  };
  std::string archs_label;
  for (const auto& a : ctx.archs.archs())
    archs_label += (archs_label.empty() ? "" : ",") + a.sm_name();
  // A host part needs its file's stub and module id, which the lowest arch's device pass writes.
  // With fewer device parts than slots, slots would idle while the device parts run: the host
  // parts then get the stub from a front-end job of their own (a few seconds), and run beside
  // them; otherwise each waits for its file's lowest arch, and the slots stay busy with devices.
  std::size_t cuda_units = 0;
  for (const auto& u : units) cuda_units += u.source.ends_with(".cu");
  const bool front_end_jobs = cuda_units * arch_entries.size() < static_cast<std::size_t>(slots);

  for (std::size_t i = 0; i < units.size(); ++i) {
    Unit& u = units[i];
    const manifest::Extension& ext = *u.ext;
    std::string source = (ctx.root / "src" / u.source).string();
    std::error_code ec;
    double estimate = static_cast<double>(fs::file_size(source, ec)) * u.share;
    fs::path log_dir = ctx.root / "logs";
    std::string log_stem = ext.name + "." + u.tag;

    if (!u.source.ends_with(".cu")) {
      std::vector<std::string> argv =
          cxx_compile_argv(ctx, ext, u.defines, source, u.object.string());
      std::string key = object_key("cxx", join(argv, "\x1f"));
      fs::path cached = cached_path(key, ".o");
      if (reuse(cached, u.object)) continue;
      Job job;
      job.label = cat(fs::path(ctx.cxx.path).filename().string(), " ", u.name);
      job.argv = std::move(argv);
      job.env = env;
      job.cwd = ctx.root / "src";
      job.log = log_dir / (log_stem + ".log");
      job.memory_gib = 2.0;
      job.on_success = store(cached, u.object);
      ext_deps[ext_index(&ext)].push_back(planned.size());
      planned.push_back({std::move(job), 2, estimate});
      continue;
    }

    // A CUDA unit: per-arch device parts and a host part, if nvcc's dry runs split as expected.
    std::optional<SplitUnit> split_unit;
    std::string why_not = arch_list.empty() ? "nvcc --list-gpu-arch said nothing" : "";
    if (!arch_list.empty()) {
      SplitUnit su;
      std::vector<nvcc::Image> images;
      const std::size_t n = arch_entries.size();  // device parts, then host, fat binary, front end
      for (std::size_t a = 0; a < n + 3 && why_not.empty(); ++a) {
        const auto& out = dry_outputs[dry_first[i] + a];
        if (!out) {
          why_not = out.error().message;
          break;
        }
        auto parsed = nvcc::parse_dryrun(*out);
        if (!parsed) {
          why_not = parsed.error().message;
          break;
        }
        if (a < n) {
          auto part = nvcc::device_part(*parsed, arch_list);
          if (!part) {
            why_not = part.error().message;
            break;
          }
          for (const auto& im : part->images) images.push_back(im);
          su.devices.push_back(std::move(*part));
          su.device_labels.push_back(arch_tokens[a]);
        } else if (a == n) {
          auto host =
              nvcc::host_part(*parsed, arch_list, su.devices.front().images, kFatbinaryFlags);
          if (!host) {
            why_not = host.error().message;
            break;
          }
          su.host = std::move(*host);
          su.env = parsed->env;
        } else if (a == n + 1) {
          auto all = nvcc::host_part(*parsed, arch_list, images, kFatbinaryFlags);
          if (!all) {
            why_not = all.error().message;
            break;
          }
          su.host.fatbinary = std::move(all->fatbinary);
          su.host.fatbin = std::move(all->fatbin);
        } else {
          auto front = nvcc::front_end_part(*parsed, arch_list);
          if (!front) {
            why_not = front.error().message;
            break;
          }
          su.front = std::move(*front);
        }
      }
      if (why_not.empty()) split_unit = std::move(su);
    }

    if (!split_unit) {
      log::verbose(cat(u.name, ": one nvcc for all archs (", why_not, ")"));
      int threads = static_cast<int>(std::clamp<std::size_t>(ctx.archs.gencode_flags().size(), 1,
                                                             static_cast<std::size_t>(slots)));
      fs::path keep = keep_dir(u) / "all";
      std::vector<std::string> argv =
          nvcc_compile_argv(ctx, ext, u.defines, source, u.object.string(), threads, keep.string());
      std::string key = object_key("nvcc", join(argv, "\x1f"));
      fs::path cached = cached_path(key, ".o");
      if (reuse(cached, u.object)) continue;
      KILN_CHECK(ensure_directory(keep));
      Job job;
      job.label = cat("nvcc ", u.name, " ", archs_label);
      job.argv = std::move(argv);
      job.env = env;
      job.cwd = ctx.root / "src";
      job.log = log_dir / (log_stem + ".log");
      job.weight = threads;
      job.memory_gib = 1.0 + 2.5 * u.share * threads;
      job.on_success = store(cached, u.object);
      ext_deps[ext_index(&ext)].push_back(planned.size());
      planned.push_back(
          {std::move(job), u.sharded ? 1 : 3, estimate * static_cast<double>(arch_entries.size())});
      continue;
    }

    SplitUnit& su = *split_unit;
    std::vector<std::pair<std::string, std::string>> step_env = env;
    for (const auto& [name, value] : su.env)
      if (name != "SOURCE_DATE_EPOCH" && name != "LC_ALL") step_env.emplace_back(name, value);
    // A job running nvcc's steps for this unit, one after another.
    auto steps_job = [&](std::string label, const std::vector<std::vector<std::string>>& steps,
                         const std::string& log_suffix, double memory_gib) {
      Job job;
      job.label = std::move(label);
      job.argv = steps.front();
      job.then.assign(steps.begin() + 1, steps.end());
      job.env = step_env;
      job.cwd = ctx.root / "src";
      job.log = log_dir / (log_stem + log_suffix);
      job.memory_gib = memory_gib;
      return job;
    };
    std::vector<std::string> device_keys;
    std::vector<std::vector<std::vector<std::string>>> device_steps;
    for (const auto& d : su.devices) {
      device_steps.push_back(in_pid_namespace(d.steps));
      device_keys.push_back(object_key("nvcc-device", join_commands(device_steps.back())));
    }
    auto front_steps = in_pid_namespace(su.front.steps);
    auto host_steps = in_pid_namespace(su.host.steps);
    // The host object refers to its fat binary by a symbol, hidden in the module, that the fat
    // binary's object defines.
    const std::string symbol =
        "__kiln_fatbin_" + sha256_hex(cat(ext.name, "/", u.tag)).substr(0, 16);
    const std::string reference = nvcc::fatbin_reference(symbol);
    const std::string assembly = nvcc::fatbin_assembly(symbol, su.host.fatbin);
    const fs::path assembly_file = su.host.fatbin.parent_path() / "fatbin.s";
    u.fatbin_object = ctx.root / "obj" / (ext.name + "." + u.tag + ".fatbin.o");
    std::vector<std::string> fatbinary = in_pid_namespace({su.host.fatbinary}).front();
    std::vector<std::string> assemble = {ctx.cxx.path, "-c", assembly_file.string(), "-o",
                                         u.fatbin_object.string()};
    // The host part depends on the device parts only through the stub and module id, which the
    // front end's commands determine (wherever they are taken from); the fat binary on all.
    std::string host_key = object_key("nvcc-host", cat(join_commands(host_steps), "\n", reference,
                                                       "\n", join_commands(front_steps)));
    std::string fatbin_key = object_key(
        "nvcc-fatbin",
        cat(join_commands({fatbinary, assemble}), "\n", assembly, "\n", join(device_keys, ",")));
    fs::path host_cached = cached_path(host_key, ".o"),
             fatbin_cached = cached_path(fatbin_key, ".o");
    const bool host_hit = reuse(host_cached, u.object);
    const bool fatbin_hit = reuse(fatbin_cached, u.fatbin_object);
    if (host_hit && fatbin_hit) continue;

    // The device parts: all for the fat binary; the lowest arch's for the stub, when cached.
    std::vector<bool> device_cached(su.devices.size(), false);
    std::vector<std::optional<std::size_t>> device_job(su.devices.size());
    for (std::size_t a = 0; a < su.devices.size(); ++a) {
      const nvcc::DevicePart& d = su.devices[a];
      const bool for_fatbin = !fatbin_hit, for_stub = a == 0 && !host_hit;
      if (!for_fatbin && !for_stub) continue;
      std::vector<fs::path> outputs = {d.module_id, d.stub};
      for (const auto& im : d.images) outputs.push_back(im.file);
      fs::path cached = cached_path(device_keys[a], ".dev");
      // A cached device part: its files back where the host part reads them.
      if (auto data = read_file(cached)) {
        auto files = unpack_files(*data);
        bool match = files && files->size() == outputs.size();
        for (std::size_t f = 0; match && f < outputs.size(); ++f)
          match = (*files)[f].first == outputs[f];
        for (std::size_t f = 0; match && f < outputs.size(); ++f)
          match = write_file_atomic(outputs[f], (*files)[f].second).has_value();
        device_cached[a] = match;
      }
      if (device_cached[a]) {
        result.objects_reused++;
        continue;
      }
      if (!for_fatbin && front_end_jobs) continue;  // the front-end job writes the stub
      Job job = steps_job(cat("nvcc ", u.name, " ", su.device_labels[a]), device_steps[a],
                          "." + arch_dir(su.device_labels[a]) + ".log", 0.5 + 2.5 * u.share);
      job.on_success = [outputs, cached]() -> Expected<void> {
        std::vector<std::pair<fs::path, std::string>> files;
        for (const auto& f : outputs) {
          KILN_TRY(std::string data, read_file(f));
          files.emplace_back(f, std::move(data));
        }
        KILN_CHECK(ensure_directory(cached.parent_path()));
        KILN_CHECK(write_file_atomic(cached, pack_files(files)));
        // The rest of nvcc's intermediates (preprocessed sources, PTX not shipped) can go.
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(outputs.front().parent_path(), ec))
          if (std::find(outputs.begin(), outputs.end(), entry.path()) == outputs.end())
            fs::remove(entry.path(), ec);
        return {};
      };
      device_job[a] = planned.size();
      planned.push_back({std::move(job), u.sharded ? 1 : 3, estimate});
    }

    std::optional<std::size_t> host_job;
    if (!host_hit) {
      // The stub and module id: from the lowest arch's device part when it is cached, from a
      // front-end job, or from that device part's job.
      const nvcc::DevicePart* from = &su.devices.front();
      std::optional<std::size_t> dep = device_job.front();
      if (!device_cached.front() && front_end_jobs) {
        from = &su.front;
        dep = planned.size();
        planned.push_back({steps_job(cat("nvcc ", u.name, " front end"), front_steps, ".front.log",
                                     0.5 + 0.5 * u.share),
                           4, estimate});
      }
      Job host = steps_job(cat("nvcc ", u.name, " host"), host_steps, ".host.log", 1.0);
      if (dep) host.deps = {*dep};
      host.before = [from = *from, hp = su.host, reference]() -> Expected<void> {
        KILN_TRY(std::string module_id, read_file(from.module_id));
        KILN_TRY(std::string stub, read_file(from.stub));
        if (stub.find(cat("#include \"", hp.fatbin_source.filename().string(), "\"")) ==
            std::string::npos)
          return Error::failed(
              cat(from.stub.string(), " does not include ", hp.fatbin_source.filename().string()));
        KILN_CHECK(write_file_atomic(hp.module_id, module_id));
        KILN_CHECK(write_file_atomic(hp.stub, nvcc::moved_stub(stub, from.stub, hp.stub)));
        return write_file_atomic(hp.fatbin_source, reference);
      };
      host.on_success = store(host_cached, u.object);
      host_job = planned.size();
      ext_deps[ext_index(&ext)].push_back(planned.size());
      planned.push_back({std::move(host), 0, estimate});
    }

    if (!fatbin_hit) {
      Job fat = steps_job(cat("fatbinary ", u.name, " ", archs_label), {fatbinary, assemble},
                          ".fatbin.log", 1.0);
      for (const auto& j : device_job)
        if (j) fat.deps.push_back(*j);
      if (host_job) fat.deps.push_back(*host_job);
      // Every arch's pass must have written the same module id and stub (they name the file's
      // entities, which the host part refers to), up to the numbering of the stub's
      // temporaries; so must the pass the host part took them from, when it ran in this build.
      std::vector<std::pair<fs::path, fs::path>> written;  // module id and stub, per pass
      for (const auto& d : su.devices) written.emplace_back(d.module_id, d.stub);
      if (host_job) written.emplace_back(su.host.module_id, su.host.stub);
      std::string name = u.name;
      fat.before = [written, assembly, assembly_file, name]() -> Expected<void> {
        KILN_TRY(std::string module_id, read_file(written.front().first));
        KILN_TRY(std::string stub, read_file(written.front().second));
        for (std::size_t p = 1; p < written.size(); ++p) {
          KILN_TRY(std::string other_id, read_file(written[p].first));
          KILN_TRY(std::string other_stub, read_file(written[p].second));
          if (other_id != module_id || !nvcc::same_stub(other_stub, stub))
            return Error::failed(
                cat(name,
                    ": nvcc's device passes for different archs disagree on the host stub or "
                    "module id; this file cannot be compiled per arch"));
        }
        return write_file_atomic(assembly_file, assembly);
      };
      fat.on_success = store(fatbin_cached, u.fatbin_object);
      ext_deps[ext_index(&ext)].push_back(planned.size());
      planned.push_back({std::move(fat), 0, estimate});
    }
  }

  // Link each module from its units' objects, in the manifest's order.
  for (std::size_t e = 0; e < ctx.manifest->extensions.size(); ++e) {
    const auto& ext = ctx.manifest->extensions[e];
    std::vector<std::string> objects;
    for (const auto& u : units) {
      if (u.ext != &ext) continue;
      objects.push_back(u.object.string());
      if (!u.fatbin_object.empty()) objects.push_back(u.fatbin_object.string());
    }
    std::string rel = module_path(ext.name, ctx.python.ext_suffix);
    fs::path out = ctx.root / "out" / rel;
    KILN_CHECK(ensure_directory(out.parent_path()));
    Job link;
    link.label = cat("link ", fs::path(rel).filename().string());
    link.argv = link_argv(ctx, objects, out.string());
    link.env = {{"LC_ALL", "C"}};
    link.cwd = ctx.root / "src";
    link.log = ctx.root / "logs" / (ext.name + ".link.log");
    link.memory_gib = 1;
    link.deps = ext_deps[e];
    planned.push_back({std::move(link), 5, 0});
    result.modules.push_back(BuiltModule{rel, out});
  }

  // The runner starts ready jobs in this order: host parts and fat binaries as soon as they can
  // (they unblock links), then the shardable sources' device parts (the longest jobs, each with
  // its host part after it: started later, they leave the other slots idle at the end; measured
  // on 2 cores, 197 s with host C++ first), then host C++, then the rest, then the front ends (a
  // few seconds each: they fill the slots the device parts leave), longest (largest) first.
  std::vector<std::size_t> order(planned.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (planned[a].order_class != planned[b].order_class)
      return planned[a].order_class < planned[b].order_class;
    return planned[a].estimate > planned[b].estimate;
  });
  std::vector<std::size_t> position(planned.size());
  for (std::size_t p = 0; p < order.size(); ++p) position[order[p]] = p;
  std::vector<Job> jobs;
  for (std::size_t p : order) {
    Job job = std::move(planned[p].job);
    for (auto& d : job.deps) d = position[d];
    jobs.push_back(std::move(job));
  }
  if (ctx.root_lock_fd >= 0)
    for (auto& job : jobs) job.inherit_fds = {ctx.root_lock_fd};
  RunnerOptions options;
  options.slots = slots;
  KILN_TRY(JobStats stats, run_jobs(jobs, options));
  result.stats = std::move(stats);
  std::error_code ec;
  fs::remove_all(ctx.root / "keep", ec);  // the objects are built: nvcc's intermediates can go
  return result;
}

}  // namespace kiln::compile
