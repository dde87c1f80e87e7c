#include "manifest/target.h"

#include <algorithm>
#include <charconv>
#include <climits>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "manifest/limits.h"
#include "manifest/toml_reader.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "packaging/wheel_name.h"

namespace kiln::manifest {

namespace {

void read_archs(const TableReader& t, Target& target) {
  std::string spec = t.required_string("archs");
  ArchSpecError error;
  if (!ArchList::parse(spec, target.archs, error)) {
    Position at = t.position("archs");
    at.column += 1 + static_cast<int>(error.offset);  // past the opening quote
    fail_at(t.source(), at, error.message);
  }
}

// manylinux = "2_28": the glibc floor of the target's compiled wheels (2.17 to 2.99).
void read_manylinux(const TableReader& t, Target& target) {
  auto floor = t.string("manylinux");
  if (!floor) return;
  std::string arch;
  int minor = manylinux_minor(cat("manylinux_", *floor, "_x86_64"), arch);
  if (!floor->starts_with("2_") || arch != "x86_64" || minor < 17 || minor > 99)
    t.fail("manylinux",
           cat("bad manylinux floor '", printable_excerpt(*floor),
               "': expected a glibc version as 2_<minor>, 2_17 to 2_99, e.g. \"2_28\""));
  target.manylinux = minor;
}

void read_cuda_debs(const SourceText& source, const TableReader& cr, Target& t) {
  if (t.cuda_toolkit != ToolkitKind::Debian) {
    if (cr.has("deb")) cr.fail("deb", "'cuda.deb' applies only to toolkit = \"debian\"");
    return;
  }
  auto debs = cr.tables("deb");
  if (debs.empty()) cr.fail_missing("deb");
  for (const toml::table* d : debs) {
    TableReader dr(source, *d, "cuda.deb", {"path", "sha256"});
    CudaDeb deb{dr.required_string("path"), dr.required_string("sha256")};
    std::string why;
    if (!is_debian_pool_path(deb.path, why))
      dr.fail("path", cat("bad pool path '", printable_excerpt(deb.path), "': ", why));
    if (!is_sha256_hex(deb.sha256))
      dr.fail("sha256", cat("bad sha256 '", printable_excerpt(deb.sha256),
                            "': expected 64 lowercase hexadecimal digits"));
    for (const auto& other : t.cuda_debs)
      if (other.package() == deb.package())
        dr.fail("path", cat("a second package ", deb.package(), " (", other.path, ")"));
    t.cuda_debs.push_back(std::move(deb));
  }
}

void read_cuda_wheels(const SourceText& source, const TableReader& cr, Target& t) {
  auto wheels = cr.tables("wheel");
  if (t.cuda_toolkit != ToolkitKind::Wheels) {
    if (cr.has("wheel")) cr.fail("wheel", "'cuda.wheel' applies only to toolkit = \"wheels\"");
    return;
  }
  if (wheels.empty()) cr.fail_missing("wheel");
  for (const toml::table* w : wheels) {
    TableReader wr(source, *w, "cuda.wheel", {"file", "sha256"});
    CudaWheel wheel{wr.required_string("file"), wr.required_string("sha256")};
    if (!packaging::parse_wheel_file_name(wheel.file) || wheel.file.find('/') != std::string::npos)
      wr.fail("file", cat("'", wheel.file,
                          "' is not a wheel file name (NAME-VERSION-PY-ABI-PLATFORM.whl)"));
    if (!is_sha256_hex(wheel.sha256))
      wr.fail("sha256",
              cat("bad sha256 '", wheel.sha256, "': expected 64 lowercase hexadecimal digits"));
    for (const auto& other : t.cuda_wheels)
      if (other.project() == wheel.project())
        wr.fail("file", cat("a second wheel of ", wheel.project(), " (", other.file, ")"));
    t.cuda_wheels.push_back(std::move(wheel));
  }
}

// [[torch.wheel]]: one pinned wheel per CPython ABI.
void read_torch_wheels(const SourceText& source, TableReader& tor, Target& t) {
  auto wheels = tor.tables("wheel");
  if (wheels.empty()) tor.fail_missing("wheel");
  for (const toml::table* w : wheels) {
    TableReader wr(source, *w, "torch.wheel", {"python", "file", "sha256"});
    TorchWheel wheel{wr.required_string("python"), wr.required_string("file"),
                     wr.required_string("sha256")};
    if (!is_cpython_tag(wheel.python_tag))
      wr.fail("python", cat("bad Python tag '", wheel.python_tag, "': expected e.g. cp311"));
    std::string prefix = cat("torch-", t.torch_version, "-");
    if (wheel.file.rfind(prefix, 0) != 0 || !packaging::parse_wheel_file_name(wheel.file) ||
        wheel.file.find(cat("-", wheel.python_tag, "-")) == std::string::npos)
      wr.fail("file", cat("'", wheel.file, "' is not a torch ", t.torch_version, " wheel for ",
                          wheel.python_tag));
    if (!is_sha256_hex(wheel.sha256))
      wr.fail("sha256",
              cat("bad sha256 '", wheel.sha256, "': expected 64 lowercase hexadecimal digits"));
    for (const auto& other : t.torch_wheels)
      if (other.python_tag == wheel.python_tag)
        wr.fail("python", cat("a second torch wheel for ", wheel.python_tag));
    t.torch_wheels.push_back(std::move(wheel));
  }
}

// [torch]: pinned wheels (source = "pypi", from the configured index or `index-url`), or the torch
// of the Python environment.
void read_torch(const SourceText& source, TableReader& top, Target& t) {
  const toml::table* torch = top.table("torch");
  if (!torch) top.fail_missing("torch");
  TableReader tor(source, *torch, "torch", {"source", "version", "wheel", "index-url"});
  std::string torch_source = tor.string("source").value_or("pypi");
  if (torch_source == "pypi")
    t.torch_source = Target::TorchSource::Pypi;
  else if (torch_source == "environment")
    t.torch_source = Target::TorchSource::Environment;
  else
    tor.fail("source",
             cat("bad torch source '", torch_source, "': expected 'pypi' or 'environment'"));
  bool pinned = t.torch_source == Target::TorchSource::Pypi;
  t.torch_version = pinned ? tor.required_string("version") : tor.string("version").value_or("");
  tor.check_length("version", t.torch_version, kMaxVersionBytes);
  if ((pinned || !t.torch_version.empty()) && !is_torch_version(t.torch_version))
    tor.fail("version", cat("bad torch version '", t.torch_version,
                            "': expected e.g. 2.11.0 or 2.11.0+cu128"));
  t.torch_index_url = tor.string("index-url").value_or("");
  tor.check_length("index-url", t.torch_index_url, kMaxUrlBytes);
  if (tor.has("index-url") && !is_index_url(t.torch_index_url))
    tor.fail("index-url", cat("bad index URL '", printable_excerpt(t.torch_index_url),
                              "': expected http:// or https:// without spaces or quotes"));
  if (pinned) return read_torch_wheels(source, tor, t);
  if (tor.has("wheel"))
    tor.fail("wheel", "'torch.wheel' does not apply to source = \"environment\"");
  if (tor.has("index-url"))
    tor.fail("index-url", "'torch.index-url' does not apply to source = \"environment\"");
}

Target parse_target_text(const std::string& text, const std::string& name,
                         const std::string& display_path) {
  SourceText source{display_path, text};
  toml::table root = parse_toml(source);
  TableReader top(source, root, "", {"target", "python", "torch", "cuda", "compiler"});
  Target t;
  t.name = name;
  t.display_path = display_path;
  if (name.size() > kMaxTargetNameBytes)
    fail_at(source, {0, 0},
            cat("target name '", printable_excerpt(name), "' is longer than ", kMaxTargetNameBytes,
                " bytes"));
  if (!is_valid_target_name(name))
    fail_at(
        source, {0, 0},
        cat("bad target name '", name, "': expected lowercase letters, digits, '.', '_' or '-'"));

  const toml::table* target = top.table("target");
  if (!target) top.fail_missing("target");
  TableReader tr(source, *target, "target", {"description", "archs", "manylinux"});
  t.description = tr.string("description").value_or("");
  read_archs(tr, t);
  read_manylinux(tr, t);

  const toml::table* python = top.table("python");
  if (!python) top.fail_missing("python");
  TableReader pr(source, *python, "python", {"interpreter", "version"});
  t.python_interpreter = pr.string("interpreter").value_or("");
  t.python_version = pr.string("version").value_or("");
  if (t.python_interpreter.empty() == t.python_version.empty())
    fail_at(source, pr.position(), "[python] needs exactly one of 'interpreter' or 'version'");
  if (!t.python_version.empty() && !is_python_version(t.python_version))
    pr.fail("version", cat("bad Python version '", t.python_version, "': expected e.g. 3.11"));

  read_torch(source, top, t);

  const toml::table* cuda = top.table("cuda");
  if (!cuda) top.fail_missing("cuda");
  TableReader cr(source, *cuda, "cuda", {"toolkit", "version", "home", "wheel", "deb"});
  std::string toolkit =
      cr.string("toolkit").value_or(std::string(toolkit_name(ToolkitKind::System)));
  auto kind = parse_toolkit_kind(toolkit);
  if (!kind)
    cr.fail("toolkit",
            cat("bad CUDA toolkit '", printable_excerpt(toolkit), "': expected ", toolkit_names()));
  t.cuda_toolkit = *kind;
  t.cuda_version = cr.required_string("version");
  if (!is_cuda_version(t.cuda_version))
    cr.fail("version",
            cat("bad CUDA version '", t.cuda_version, "': expected MAJOR.MINOR such as 13.0"));
  t.cuda_home = cr.string("home").value_or("");
  if (!t.cuda_home.empty() && t.cuda_toolkit != ToolkitKind::System)
    cr.fail("home", "'cuda.home' applies only to the system toolkit");
  read_cuda_wheels(source, cr, t);
  read_cuda_debs(source, cr, t);

  if (const toml::table* compiler = top.table("compiler")) {
    TableReader comp(source, *compiler, "compiler", {"cxx"});
    t.cxx = comp.string("cxx").value_or("g++");
    if (t.cxx.empty()) comp.fail("cxx", "'compiler.cxx' must not be empty");
  }
  return t;
}

}  // namespace

std::string CudaWheel::project() const {
  return packaging::normalize_name(file.substr(0, file.find('-')));
}

std::string CudaDeb::file() const {
  std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string CudaDeb::package() const {
  std::string f = file();
  return f.substr(0, f.find('_'));
}

bool is_debian_pool_path(std::string_view path, std::string& why) {
  auto ok = [](char c) {
    return is_ascii_alnum(c) || c == '.' || c == '+' || c == '~' || c == '_' || c == '-' ||
           c == '/';
  };
  if (path.size() > kMaxPoolPathBytes)
    why = cat("longer than ", kMaxPoolPathBytes, " bytes");
  else if (!path.starts_with("pool/"))
    why = "expected a path in the archive's pool, starting with pool/";
  else if (!std::all_of(path.begin(), path.end(), ok))
    why = "only letters, digits and . + ~ _ - / are allowed";
  else if (!path.ends_with(".deb") || path.ends_with("/.deb"))
    why = "expected a .deb file";
  else
    for (const auto& part : split(path, "/", /*skip_empty=*/false))
      if (part.empty() || part == "." || part == "..") {
        why = "has an empty, '.' or '..' component";
        break;
      }
  return why.empty();
}

bool is_valid_target_name(std::string_view name) {
  auto ok = [](char c) {
    return is_ascii_lower(c) || is_ascii_digit(c) || c == '.' || c == '_' || c == '-';
  };
  return !name.empty() && (is_ascii_lower(name[0]) || is_ascii_digit(name[0])) &&
         std::all_of(name.begin(), name.end(), ok);
}

bool is_torch_version(std::string_view version) {
  std::size_t plus = version.find('+');
  if (plus == std::string_view::npos) return packaging::is_canonical_version(version);
  std::string_view label = version.substr(plus + 1);
  return packaging::is_canonical_version(version.substr(0, plus)) && !label.empty() &&
         std::all_of(label.begin(), label.end(),
                     [](char c) { return is_ascii_lower(c) || is_ascii_digit(c) || c == '.'; });
}

bool is_index_url(std::string_view url) {
  if (!url.starts_with("https://") && !url.starts_with("http://")) return false;
  return std::all_of(url.begin(), url.end(), [](char c) {
    return c > ' ' && c < 0x7f && c != '"' && c != '\'' && c != '\\' && c != '<' && c != '>';
  });
}

bool is_python_version(std::string_view version) {  // 3.N or 3.NN
  return (version.size() == 3 || version.size() == 4) && version.substr(0, 2) == "3." &&
         std::all_of(version.begin() + 2, version.end(), is_ascii_digit);
}

bool is_cpython_tag(std::string_view tag) {  // cp3N, cp3NN, then maybe t (free-threaded)
  if (tag.ends_with('t')) tag.remove_suffix(1);
  return (tag.size() == 4 || tag.size() == 5) && tag.substr(0, 3) == "cp3" &&
         std::all_of(tag.begin() + 3, tag.end(), is_ascii_digit);
}

bool is_cuda_version(std::string_view version) {  // NN.N
  return version.size() == 4 && is_ascii_digit(version[0]) && is_ascii_digit(version[1]) &&
         version[2] == '.' && is_ascii_digit(version[3]);
}

namespace {

bool is_platform_arch_char(char c) {
  return is_ascii_lower(c) || is_ascii_digit(c) || c == '_';
}

}  // namespace

int manylinux_minor(std::string_view tag, std::string& arch) {
  Scanner s(tag);
  int minor = -1;
  if (s.skip("manylinux_2_")) {  // PEP 600: manylinux_2_<minor>_<arch>
    std::string_view digits = s.take_while(is_ascii_digit);
    if (digits.empty() || !s.skip('_')) return -1;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), minor);
    if (ec != std::errc()) minor = INT_MAX;  // more than an int holds: promises every glibc
  } else if (s.skip("manylinux")) {          // PEP 513, 571, 599
    minor = s.skip("1_") ? 5 : s.skip("2010_") ? 12 : s.skip("2014_") ? 17 : -1;
    if (minor < 0) return -1;
  } else {
    return -1;
  }
  std::string_view arch_part = s.take_while(is_platform_arch_char);
  if (arch_part.empty() || !s.done()) return -1;
  arch = std::string(arch_part);
  return minor;
}

int wheel_manylinux_floor(std::string_view wheel_file) {
  auto wheel = packaging::parse_wheel_file_name(wheel_file);
  if (!wheel) return -1;
  int floor = -1;
  for (const auto& tag : wheel->platform_tags) {
    std::string arch;
    int minor = manylinux_minor(tag, arch);
    if (minor >= 0 && (floor < 0 || minor < floor)) floor = minor;
  }
  return floor;
}

std::string Target::interpreter() const {
  return python_interpreter.empty() ? cat("python", python_version) : python_interpreter;
}

std::string Target::torch_minor() const {
  auto parts = split(torch_version, ".");
  return parts.size() >= 2 ? cat(parts[0], ".", parts[1]) : torch_version;
}

nlohmann::json Target::canonical() const {
  nlohmann::json wheels = nlohmann::json::array();
  for (const auto& w : torch_wheels)
    wheels.push_back({{"python", w.python_tag}, {"file", w.file}, {"sha256", w.sha256}});
  nlohmann::json cuda = {
      {"toolkit", toolkit_name(cuda_toolkit)}, {"version", cuda_version}, {"home", cuda_home}};
  for (const auto& w : cuda_wheels)
    cuda["wheels"].push_back({{"file", w.file}, {"sha256", w.sha256}});
  for (const auto& d : cuda_debs) cuda["debs"].push_back({{"path", d.path}, {"sha256", d.sha256}});
  return {{"python", {{"interpreter", python_interpreter}, {"version", python_version}}},
          {"torch",
           {{"source", torch_source == TorchSource::Pypi ? "pypi" : "environment"},
            {"version", torch_version},
            {"wheels", wheels}}},
          {"cuda", cuda},
          {"cxx", cxx},
          {"archs", archs.canonical()},
          {"manylinux", manylinux}};
}

Expected<Target> parse_target(const std::string& text, const std::string& name,
                              const std::string& display_path) {
  try {
    return parse_target_text(text, name, display_path);
  } catch (const KilnError& e) {
    return e.error();
  }
}

Expected<Target> load_target(const std::filesystem::path& file, const std::string& display_path) {
  auto text = read_file(file);
  if (!text) return Error::bad_input(cat(display_path, ": cannot read target"));
  return parse_target(*text, file.stem().string(), display_path);
}

Target with_archs(const Target& target, const ArchList& archs) {
  Target derived = target;
  derived.archs = archs;
  derived.name = cat(target.name, "-", archs.slug());
  return derived;
}

}  // namespace kiln::manifest
