// Check "import" (only with --import-with PYTHON): the wheel installed into a temporary directory
// (its files laid out as an installer would: root, and .data/purelib and platlib) and every
// top-level module and every extension module imported by that Python, after torch when it has it.
#include <fstream>
#include <set>

#include "core/fs.h"
#include "core/json.h"
#include "core/process.h"
#include "core/strings.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace fs = std::filesystem;

namespace {

// Where an entry lands in site-packages, or "" when an import does not need it.
std::string installed_path(const LoadedWheel& w, const std::string& name) {
  if (!w.dist_info.empty() && name.rfind(w.dist_info + "/", 0) == 0) return name;
  std::string data = cat(w.name.distribution, "-", w.name.version, ".data/");
  if (name.rfind(data, 0) == 0) {
    std::string rest = name.substr(data.size());
    for (const char* lib : {"purelib/", "platlib/"})
      if (rest.rfind(lib, 0) == 0) return rest.substr(std::string(lib).size());
    return "";
  }
  return name;
}

// "pkg/_C.cpython-311-x86_64-linux-gnu.so" -> "pkg._C".
std::string extension_module(const std::string& path) {
  auto slash = path.rfind('/');
  std::string p = path.substr(0, path.find('.', slash == std::string::npos ? 0 : slash + 1));
  for (char& c : p)
    if (c == '/') c = '.';
  return p;
}

const char* kScript = R"(
import importlib, json, os, sys, warnings
warnings.simplefilter("ignore")
root = os.path.realpath(sys.argv[1])
sys.path.insert(0, root)  # here, not PYTHONPATH: the wheel must not shadow what this script imports
try:
    import torch  # extension modules need torch's libraries loaded first
except Exception:
    pass
results = []
for name in sys.argv[2:]:
    try:
        m = importlib.import_module(name)
        where = os.path.realpath(getattr(m, "__file__", None) or next(iter(getattr(m, "__path__", [])), ""))
        if not where.startswith(root + os.sep):
            results.append([name, "imported from " + where + ", not from the wheel"])
        else:
            results.append([name, ""])
    except BaseException as e:
        results.append([name, type(e).__name__ + ": " + str(e).splitlines()[0] if str(e) else type(e).__name__])
print("KILN-IMPORT " + json.dumps(results))
)";

// What the wheel installed: every file (relative to site-packages) but the dist-info's, and the
// modules to import.
struct Installed {
  std::set<std::string> files;
  std::set<std::string> modules;
};

// Writes the entries an import needs under `root` as an installer would lay them out; each
// extension module becomes a module to import. An entry that cannot be read or written fails.
Installed install(const LoadedWheel& w, const fs::path& root, Findings& f) {
  Installed out;
  std::set<std::string> extension_paths;
  for (const auto& b : w.binaries)
    if (b.extension) extension_paths.insert(b.path);
  for (const auto& e : w.zip->entries()) {
    if (e.is_directory()) continue;
    std::string dest = installed_path(w, e.name);
    if (dest.empty()) continue;
    auto data = w.zip->read(e);
    if (!data) {
      f.fail(data.error().message);
      continue;
    }
    fs::path file = root / dest;
    std::error_code ec;
    fs::create_directories(file.parent_path(), ec);
    std::ofstream(file, std::ios::binary) << *data;
    fs::permissions(file, e.is_executable() ? fs::perms(0755) : fs::perms(0644), ec);
    if (fs::file_size(file, ec) != data->size() || ec) {
      f.fail(cat("cannot write ", file.string()));
      continue;
    }
    if (!w.dist_info.empty() && dest.rfind(w.dist_info + "/", 0) == 0) continue;
    out.files.insert(dest);
    if (extension_paths.count(e.name)) out.modules.insert(extension_module(dest));
  }
  return out;
}

// Top-level modules and packages; for a namespace portion (a directory without __init__.py, as
// flash-linear-attention's fla/), its packages one level down.
void add_top_level_modules(Installed& installed) {
  for (const auto& dest : installed.files) {
    auto parts = split(dest, "/");
    if (parts.size() == 1 && dest.size() > 3 && dest.substr(dest.size() - 3) == ".py") {
      installed.modules.insert(dest.substr(0, dest.size() - 3));
    } else if (parts.size() == 2 && parts[1] == "__init__.py" &&
               parts[0].find('.') == std::string::npos) {
      installed.modules.insert(parts[0]);
    } else if (parts.size() == 3 && parts[2] == "__init__.py" &&
               !installed.files.count(parts[0] + "/__init__.py") &&
               parts[0].find('.') == std::string::npos) {
      installed.modules.insert(cat(parts[0], ".", parts[1]));
    }
  }
}

// What `python` reads when it starts (its prefixes and sys.path, asked of it: a .pth file may
// add any directory), for the sandbox to hold read-only.
Expected<std::vector<fs::path>> python_paths(const std::string& python) {
  ProcessSpec spec;
  spec.argv = {python, "-c",
               "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, *sys.path]))"};
  spec.env_set = {{"PYTHONNOUSERSITE", "1"}};
  spec.env_unset = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"};
  auto r = run_process(spec);
  if (!r || !r->ok())
    return Error::failed(
        cat("cannot ask ", python, " for its paths", r ? cat(": ", tail_lines(r->output, 2)) : ""));
  auto parsed = parse_json(trim(tail_lines(r->output, 1)));
  std::vector<fs::path> paths = {fs::path(python).parent_path().parent_path()};
  if (!parsed.is_array()) return Error::failed(cat(python, " did not say its paths"));
  std::error_code ec;
  for (const auto& p : parsed) {
    if (!p.is_string() || paths.size() > 64) continue;
    fs::path path = fs::path(p.get<std::string>()).lexically_normal();
    // Not the whole host, nor its kernel's and devices' views (the sandbox has its own).
    bool host = path == "/" || path_within(path, "/proc") || path_within(path, "/sys") ||
                path_within(path, "/dev");
    if (path.is_absolute() && !host && fs::exists(path, ec)) paths.push_back(path);
  }
  return paths;
}

// The import's argv: in the sandbox (the Python's paths and `dir` read-only), unless `mode` is
// off or (auto) no sandbox can be made here, which `f` notes.
Expected<std::vector<std::string>> import_argv(std::vector<std::string> argv,
                                               const std::string& python, const fs::path& dir,
                                               SandboxMode mode, Findings& f) {
  if (mode == SandboxMode::Off) {
    f.note("not sandboxed: KILN_SANDBOX=off");
    return argv;
  }
  if (const auto& available = sandbox_available(); !available) {
    if (mode == SandboxMode::Required)
      return Error::failed(cat("the import's sandbox cannot be made here (",
                               available.error().message, "), and KILN_SANDBOX=required"));
    f.note(cat("not sandboxed: ", available.error().message));
    return argv;
  }
  SandboxSpec spec;
  KILN_TRY(spec.read_only, python_paths(python));
  spec.read_only.push_back(dir);
  spec.keep_env = {"PATH", "LANG", "LC_ALL", "PYTHONNOUSERSITE", "PYTHONDONTWRITEBYTECODE"};
  return sandboxed(spec, argv);
}

// Runs kScript with `python` in `dir` and reads its report: each module imported, or why not.
CheckResult import_modules(const Options& options, const fs::path& dir, const fs::path& root,
                           const std::set<std::string>& modules, Findings& f) {
  const std::string& python = options.import_with;
  ProcessSpec spec;
  spec.argv = {python, "-c", kScript, root.string()};
  spec.argv.insert(spec.argv.end(), modules.begin(), modules.end());
  auto argv = import_argv(std::move(spec.argv), python, dir, options.sandbox, f);
  if (!argv) {
    f.fail(argv.error().message);
    return f.finish("");
  }
  spec.argv = std::move(*argv);
  spec.cwd = dir;
  spec.env_set = {{"PYTHONNOUSERSITE", "1"}, {"PYTHONDONTWRITEBYTECODE", "1"}};
  spec.env_unset = {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP"};
  auto result = run_process(spec);
  if (!result) {
    f.fail(cat("cannot run ", python, ": ", result.error().message));
    return f.finish("");
  }
  auto marker = result->output.rfind("KILN-IMPORT ");
  if (marker == std::string::npos) {
    f.fail(cat(python, " exited with ", result->exit_code,
               " before reporting: ", tail_lines(result->output, 3)));
    return f.finish("");
  }
  std::string line = result->output.substr(marker + 12);
  line = line.substr(0, line.find('\n'));
  auto parsed = parse_json(line);
  if (parsed.is_discarded() || !parsed.is_array()) {
    f.fail(cat("unreadable report from ", python));
    return f.finish("");
  }
  std::vector<std::string> ok;
  for (const auto& r : parsed) {
    // The modules imported print too: a line of theirs that looks like the report is no report.
    if (!r.is_array() || r.size() != 2 || !r[0].is_string() || !r[1].is_string()) {
      f.fail(cat("unreadable report from ", python));
      return f.finish("");
    }
    std::string name = r[0].get<std::string>(), error = r[1].get<std::string>();
    if (error.empty())
      ok.push_back(name);
    else
      f.fail(cat("import ", name, ": ", error));
  }
  f.data()["python"] = python;
  f.data()["imported"] = ok;
  return f.finish(cat("imported ", join(ok, ", "), " with ", python));
}

}  // namespace

CheckResult check_import(const LoadedWheel& w, const Options& options) {
  const std::string id = "import";
  if (!w.zip) return skipped(id, "the archive is unreadable");
  Findings f(id);
  auto dir = TempDir::create(fs::temp_directory_path(), "kiln-import-");
  if (!dir) {
    f.fail(dir.error().message);
    return f.finish("");
  }
  // Read by nobody, in the sandbox (mkdtemp made it the caller's alone).
  std::error_code ec;
  fs::permissions(dir->path(), fs::perms(0755), ec);
  const fs::path root = dir->path() / "site-packages";
  Installed installed = install(w, root, f);
  add_top_level_modules(installed);
  if (f.failed()) return f.finish("");
  if (installed.modules.empty()) return skipped(id, "no importable modules");
  return import_modules(options, dir->path(), root, installed.modules, f);
}

}  // namespace kiln::validate
