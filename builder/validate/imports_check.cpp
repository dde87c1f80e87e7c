// Check "imports": what the wheel's Python files import from the wheel's own packages is in the
// wheel (a module, a package or an extension module), and every extension module exports
// PyInit_<its name>. An extension declared with a bare name next to a package that imports it
// (torchsort's `from .isotonic_cpu import …` with `name = "isotonic_cpu"`) lands at the top level
// and fails here, without importing anything. The Python text is scanned in one forward pass, no
// recursion: strings and comments skipped, logical lines joined, blocks tracked by indentation.
#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "core/strings.h"
#include "validate/checks.h"

namespace kiln::validate {

namespace {

// One logical line: strings replaced by a space-separated "S", comments dropped, continuation
// lines joined.
struct LogicalLine {
  int line = 0;
  int indent = 0;
  std::string code;
};

bool is_word_char(char c) {
  return is_ascii_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

// Python's line ends: "\r\n", "\r" and "\n". Consumes one at `i`, or returns false.
bool skip_newline(std::string_view t, std::size_t& i) {
  if (t[i] == '\n') return ++i, true;
  if (t[i] != '\r') return false;
  ++i;
  if (i < t.size() && t[i] == '\n') ++i;
  return true;
}

// Skips a string literal whose opening quote is at `i` (escapes honoured; a single-quoted string
// also ends at a line end), counting the line ends it holds.
void skip_string(std::string_view t, std::size_t& i, int& line) {
  char q = t[i];
  bool triple = i + 2 < t.size() && t[i + 1] == q && t[i + 2] == q;
  i += triple ? 3 : 1;
  while (i < t.size()) {
    if (t[i] == '\\') {
      ++i;
      if (i < t.size()) {
        if (skip_newline(t, i))
          ++line;
        else
          ++i;
      }
      continue;
    }
    if (t[i] == '\n' || t[i] == '\r') {
      if (!triple) return;  // an unterminated string: the line ends it
      skip_newline(t, i);
      ++line;
      continue;
    }
    if (t[i] == q) {
      if (!triple) return void(++i);
      if (i + 2 < t.size() && t[i + 1] == q && t[i + 2] == q) return void(i += 3);
    }
    ++i;
  }
}

constexpr std::size_t kMaxLogicalLine = 1 << 20;

std::vector<LogicalLine> logical_lines(std::string_view t) {
  std::vector<LogicalLine> out;
  std::size_t i = 0;
  int line = 1;
  while (i < t.size()) {
    LogicalLine l;
    l.line = line;
    while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\f'))
      l.indent = t[i++] == '\t' ? (l.indent / 8 + 1) * 8 : l.indent + 1;
    int depth = 0;
    bool ended = false;
    auto add = [&](std::string_view piece) {  // past the cap, the statement is cut
      if (l.code.size() < kMaxLogicalLine) l.code += piece;
    };
    while (i < t.size() && !ended) {
      char c = t[i];
      if (c == '#') {
        while (i < t.size() && t[i] != '\n' && t[i] != '\r') ++i;
      } else if (c == '\'' || c == '"') {
        skip_string(t, i, line);
        add(" S ");
      } else if (c == '\\' && i + 1 < t.size() && (t[i + 1] == '\n' || t[i + 1] == '\r')) {
        ++i;
        skip_newline(t, i);
        ++line;
        add(" ");
      } else if (skip_newline(t, i)) {
        ++line;
        if (depth > 0)
          add(" ");
        else
          ended = true;
      } else {
        if (c == '(' || c == '[' || c == '{') ++depth;
        if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
        add(std::string_view(&c, 1));
        ++i;
      }
    }
    if (l.code.find_first_not_of(" \t\f") != std::string::npos) out.push_back(std::move(l));
  }
  return out;
}

// The words written inside the text's single-line string literals (at most 100000): names a
// package may import or alias dynamically (importlib, sys.modules).
std::set<std::string> words_in_strings(std::string_view t) {
  std::set<std::string> out;
  std::size_t i = 0;
  int line = 0;
  while (i < t.size() && out.size() < 100000) {
    char c = t[i];
    if (c == '#') {
      while (i < t.size() && t[i] != '\n' && t[i] != '\r') ++i;
    } else if (c == '\'' || c == '"') {
      std::size_t start = i;
      bool triple = i + 2 < t.size() && t[i + 1] == c && t[i + 2] == c;
      skip_string(t, i, line);
      // Not triple-quoted ones: docstrings name modules in prose.
      std::string_view lit = triple ? std::string_view() : t.substr(start, i - start);
      for (std::size_t k = 0; k < lit.size();) {
        if (!is_word_char(lit[k])) {
          ++k;
          continue;
        }
        std::size_t b = k;
        while (k < lit.size() && is_word_char(lit[k])) ++k;
        out.emplace(lit.substr(b, k - b));
      }
    } else {
      ++i;
    }
  }
  return out;
}

// Words, dots and punctuation of a statement.
std::vector<std::string_view> tokens(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    if (is_ascii_space(s[i])) {
      ++i;
    } else if (is_word_char(s[i])) {
      std::size_t start = i;
      while (i < s.size() && is_word_char(s[i])) ++i;
      out.push_back(s.substr(start, i - start));
    } else {
      out.push_back(s.substr(i++, 1));
    }
  }
  return out;
}

// A dotted name from tokens at `k` ("" when there is none).
std::string dotted(const std::vector<std::string_view>& tok, std::size_t& k) {
  std::string name;
  while (k < tok.size() && is_word_char(tok[k][0])) {
    name += tok[k++];
    if (k + 1 < tok.size() && tok[k] == "." && is_word_char(tok[k + 1][0])) {
      name += '.';
      ++k;
    } else {
      break;
    }
  }
  return name;
}

// "pkg.sub" at `level` 2 -> "pkg"; nullopt above the top.
std::optional<std::string> resolve_relative(std::string_view package, int level,
                                            const std::string& name) {
  std::vector<std::string> parts = split(package, ".");
  if (parts.empty() || static_cast<std::size_t>(level - 1) >= parts.size()) return std::nullopt;
  parts.resize(parts.size() - (level - 1));
  std::string base = join(parts, ".");
  return name.empty() ? base : cat(base, ".", name);
}

// One import statement's imports into `out` (nothing when `stmt` is not one).
void parse_import(std::string_view stmt, std::string_view package, PyImport base,
                  std::vector<PyImport>& out) {
  auto tok = tokens(stmt);
  std::size_t k = 0;
  if (tok.empty()) return;
  if (tok[0] == "import") {
    k = 1;
    while (k < tok.size()) {
      std::string name = dotted(tok, k);
      if (name.empty()) return;
      PyImport im = base;
      im.module = im.written = name;
      out.push_back(std::move(im));
      if (k + 1 < tok.size() && tok[k] == "as") k += 2;
      if (k >= tok.size() || tok[k] != ",") return;
      ++k;
    }
    return;
  }
  if (tok[0] != "from") return;
  k = 1;
  PyImport im = base;
  im.from = true;
  while (k < tok.size() && tok[k] == ".") ++im.level, ++k;
  std::string name = k < tok.size() && tok[k] == "import" ? "" : dotted(tok, k);
  if ((name.empty() && im.level == 0) || k >= tok.size() || tok[k] != "import") return;
  ++k;
  im.written = std::string(im.level, '.') + name;
  if (im.level == 0)
    im.module = name;
  else
    im.module = resolve_relative(package, im.level, name).value_or("");
  for (; k < tok.size(); ++k) {
    if (tok[k] == "*" || is_word_char(tok[k][0])) {
      im.names.emplace_back(tok[k]);
      if (k + 2 < tok.size() && tok[k + 1] == "as") k += 2;
    } else if (tok[k] != "," && tok[k] != "(" && tok[k] != ")") {
      break;
    }
  }
  out.push_back(std::move(im));
}

bool starts_with_word(std::string_view s, std::string_view word) {
  return s.substr(0, word.size()) == word &&
         (s.size() == word.size() || !is_word_char(s[word.size()]));
}

enum class Block { Other, Try, TypeChecking, Platform };

// Whether an if's condition asks which platform this is: sys.platform, os.name, platform.system(),
// or a constant such as psutil's WINDOWS, LINUX, MACOS (IS_WINDOWS, _WIN32, ...).
bool asks_platform(std::string_view condition) {
  static const std::set<std::string_view> kNames = {
      "WINDOWS", "WIN32",  "LINUX", "MACOS", "OSX",   "DARWIN", "BSD",      "FREEBSD",
      "OPENBSD", "NETBSD", "SUNOS", "AIX",   "POSIX", "CYGWIN", "MSWINDOWS"};
  for (std::string_view call :
       {"sys.platform", "os.name", "platform.system", "platform.machine", "sys.getwindowsversion"})
    if (condition.find(call) != std::string_view::npos) return true;
  Scanner s(condition);
  while (!s.done()) {
    s.take_while([](char c) { return !is_word_char(c); });
    std::string_view word = s.take_while(is_word_char);
    while (word.starts_with('_')) word.remove_prefix(1);
    if (word.starts_with("IS_")) word.remove_prefix(3);
    if (kNames.count(word)) return true;
  }
  return false;
}

// A compound statement's header ("try:", "if TYPE_CHECKING:"): its kind and the text after its
// colon (an inline body), or nullopt when `stmt` is not one.
std::optional<std::pair<Block, std::string_view>> header(std::string_view stmt) {
  static const char* kWords[] = {"try", "if",    "elif", "else",  "except", "finally", "with",
                                 "for", "while", "def",  "class", "async",  "match",   "case"};
  bool compound = false;
  for (const char* w : kWords) compound = compound || starts_with_word(stmt, w);
  if (!compound) return std::nullopt;
  // The header's colon: the first ':' outside brackets (a lambda's or a slice's are inside
  // brackets, or come after the header's own colon).
  int depth = 0;
  std::size_t colon = std::string_view::npos;
  for (std::size_t i = 0; i < stmt.size() && colon == std::string_view::npos; ++i) {
    char c = stmt[i];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    if (c == ':' && depth == 0) colon = i;
  }
  if (colon == std::string_view::npos) return std::nullopt;
  std::string_view head = trim(stmt.substr(0, colon));
  Block kind = Block::Other;
  if (head == "try") kind = Block::Try;
  if (head == "if TYPE_CHECKING" || head == "if typing.TYPE_CHECKING" ||
      head == "if typing . TYPE_CHECKING")
    kind = Block::TypeChecking;
  else if ((starts_with_word(head, "if") || starts_with_word(head, "elif")) && asks_platform(head))
    kind = Block::Platform;
  return std::pair{kind, trim(stmt.substr(colon + 1))};
}

// The kind of a line's block in its if/elif/else chain: the elif and else of an if on the
// platform are on it too. `chains` holds, per indent, whether the chain open there is.
Block in_chain(std::map<int, bool>& chains, int indent, std::string_view stmt, Block kind) {
  chains.erase(chains.upper_bound(indent), chains.end());
  bool continues = starts_with_word(stmt, "elif") || starts_with_word(stmt, "else");
  auto open = chains.find(indent);
  bool platform = kind == Block::Platform || (continues && open != chains.end() && open->second);
  if (starts_with_word(stmt, "if") || continues)
    chains[indent] = platform;
  else
    chains.erase(indent);
  return platform ? Block::Platform : kind;
}

void mark(PyImport& im, Block kind) {
  im.guarded = im.guarded || kind == Block::Try;
  im.type_checking = im.type_checking || kind == Block::TypeChecking;
  im.platform = im.platform || kind == Block::Platform;
}

}  // namespace

std::vector<PyImport> scan_imports(std::string_view text, std::string_view package,
                                   std::size_t max_imports) {
  constexpr std::size_t kMaxDepth = 256;
  std::vector<PyImport> out;
  std::vector<std::pair<int, Block>> blocks;  // open blocks: header indent, kind
  std::map<int, bool> chains;                 // if/elif/else chains on the platform, by indent
  for (const auto& l : logical_lines(text)) {
    while (!blocks.empty() && blocks.back().first >= l.indent) blocks.pop_back();
    PyImport base;
    base.line = l.line;
    for (const auto& b : blocks) mark(base, b.second);
    bool first = true;
    for (std::string_view stmt : split(l.code, ";")) {
      stmt = trim(stmt);
      // Nested inline headers ("try: import x", "if TYPE_CHECKING: import y") apply to the rest.
      PyImport here = base;
      for (auto h = header(stmt); h; h = header(stmt)) {
        Block kind = first ? in_chain(chains, l.indent, stmt, h->first) : h->first;
        first = false;
        if (h->second.empty()) {
          if (blocks.size() < kMaxDepth) blocks.emplace_back(l.indent, kind);
          stmt = {};
          break;
        }
        mark(here, kind);
        stmt = h->second;
      }
      if (first) in_chain(chains, l.indent, stmt, Block::Other);
      first = false;
      if (starts_with_word(stmt, "import") || starts_with_word(stmt, "from"))
        parse_import(stmt, package, here, out);
      if (out.size() >= max_imports) {
        out.resize(max_imports);
        return out;
      }
    }
  }
  return out;
}

namespace {

// Where an entry lands in site-packages ("" for the dist-info and the other .data trees).
std::string site_path(const LoadedWheel& w, const std::string& name) {
  if (!w.dist_info.empty() && name.rfind(w.dist_info + "/", 0) == 0) return "";
  std::string data = cat(w.name.distribution, "-", w.name.version, ".data/");
  if (name.rfind(data, 0) != 0) return name;
  std::string rest = name.substr(data.size());
  for (std::string_view lib : {"purelib/", "platlib/"})
    if (rest.rfind(lib, 0) == 0) return rest.substr(lib.size());
  return "";
}

std::string dots(std::string path) {
  std::replace(path.begin(), path.end(), '/', '.');
  return path;
}

// The wheel's modules as an importer would find them once installed.
struct Layout {
  std::set<std::string> modules;  // a.b for a/b.py, a/b/__init__.py, a/b.<tag>.so, a/b.so
  std::set<std::string> regular;  // packages with an __init__.py: a.b
  std::set<std::string> dirs;     // every directory holding a file: a, a.b
  std::set<std::string> tops;     // top-level modules and directories holding Python files
  std::map<std::string, std::string> extensions;  // last name part -> an extension's path
  // A regular package -> the words in its __init__.py's strings: a submodule it names there may
  // come from elsewhere (fla's __init__ imports 'fla.layers', which another wheel ships, and
  // aliases 'norm.layernorm' as fla.modules.layernorm through sys.modules).
  std::map<std::string, std::set<std::string>> string_words;
  // Regular packages whose __init__.py may define names it never writes (defines_any_name).
  std::set<std::string> open_packages;
};

Layout layout_of(const LoadedWheel& w) {
  Layout l;
  for (const auto& m : w.members) {
    std::string p = site_path(w, m.name);
    if (p.empty()) continue;
    auto slash = p.rfind('/');
    std::string dir = slash == std::string::npos ? "" : p.substr(0, slash);
    std::string file = p.substr(slash == std::string::npos ? 0 : slash + 1);
    for (std::size_t s = dir.find('/'); !dir.empty(); s = dir.find('/', s + 1)) {
      l.dirs.insert(dots(dir.substr(0, s)));
      if (s == std::string::npos) break;
    }
    std::string stem = file.substr(0, file.find('.'));
    std::string prefix = dir.empty() ? "" : dots(dir) + ".";
    bool py = file.ends_with(".py"), so = file.ends_with(".so");
    if (!py && !so) continue;
    l.tops.insert(p.substr(0, p.find_first_of("/.")));
    if (file == "__init__.py") {
      if (!dir.empty()) l.regular.insert(dots(dir)), l.modules.insert(dots(dir));
    } else if (py ? file == stem + ".py" : true) {
      l.modules.insert(prefix + stem);
      if (so) l.extensions.emplace(stem, p);
    }
  }
  return l;
}

// How many times `name` is written as a word in `text`, up to 2 (a crude "the package defines
// it": its own "from . import name" is one).
int mentions(std::string_view text, std::string_view name) {
  int n = 0;
  for (std::size_t at = text.find(name); at != std::string_view::npos && n < 2;
       at = text.find(name, at + 1)) {
    bool left = at == 0 || !is_word_char(text[at - 1]);
    bool right = at + name.size() >= text.size() || !is_word_char(text[at + name.size()]);
    n += left && right;
  }
  return n;
}

// Whether a package's __init__.py may define names it never writes: a star import
// ("from .numeric import *", as numpy's _core does) or a module __getattr__ (PEP 562).
bool defines_any_name(std::string_view init) {
  for (const auto& im : scan_imports(init, "", 10000))
    if (std::find(im.names.begin(), im.names.end(), "*") != im.names.end()) return true;
  return init.find("def __getattr__(") != std::string_view::npos;
}

std::string parent_of(const std::string& module) {
  auto dot = module.rfind('.');
  return dot == std::string::npos ? "" : module.substr(0, dot);
}

// Why `module` is missing from the wheel, when its parent is a regular package of this wheel and
// it is not there ("" when it is there, or when another wheel may provide it).
std::string missing(const Layout& l, const std::string& module) {
  std::string parent = parent_of(module);
  if (parent.empty() || !l.regular.count(parent)) return "";
  if (l.modules.count(module) || l.dirs.count(module)) return "";
  auto named = l.string_words.find(parent);
  if (named != l.string_words.end() && named->second.count(module.substr(parent.size() + 1)))
    return "";
  std::string path = module;
  std::replace(path.begin(), path.end(), '.', '/');
  std::string why = cat(module, ", which is not in the wheel (no ", path, ".py, ", path,
                        "/__init__.py or extension ", path, ".*.so)");
  auto ext = l.extensions.find(module.substr(parent.size() + 1));
  if (ext != l.extensions.end())
    why += cat("; the extension ", ext->second, " is elsewhere: a module inside a package needs ",
               "a dotted extension name (name = \"", module, "\")");
  return why;
}

// The package a Python file belongs to: "a.b" for a/b/c.py and a/b/__init__.py.
std::string package_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : dots(path.substr(0, slash));
}

// The module a Python file is: "a.b" for a/b.py and a/b/__init__.py.
std::string module_of(const std::string& path) {
  std::string m = path.ends_with("/__init__.py") ? path.substr(0, path.size() - 12)
                                                 : path.substr(0, path.size() - 3);
  return dots(m);
}

// The wheel's modules that only a platform's branch imports (psutil's _pswindows, imported under
// `elif WINDOWS:`): imported somewhere, and never but under a platform condition. Their own
// imports are that platform's (psutil._psutil_windows), not reported.
std::set<std::string> platform_modules(
    const std::map<std::string, std::vector<PyImport>>& imports) {
  std::set<std::string> on_a_platform, everywhere;
  for (const auto& [path, list] : imports) {
    for (const auto& im : list) {
      if (im.type_checking) continue;
      std::set<std::string>& into = im.platform ? on_a_platform : everywhere;
      into.insert(im.module);
      for (const auto& name : im.names) into.insert(cat(im.module, ".", name));
    }
  }
  std::set<std::string> out;
  std::set_difference(on_a_platform.begin(), on_a_platform.end(), everywhere.begin(),
                      everywhere.end(), std::inserter(out, out.end()));
  return out;
}

void check_file(const Layout& l, const LoadedWheel& w, const std::string& path,
                const std::vector<PyImport>& imports, Findings& f) {
  for (const auto& im : imports) {
    if (im.type_checking || im.platform) continue;  // not run, or not on every platform
    auto report = [&](const std::string& line) {
      std::string at = cat(path, ":", im.line, ": ");
      if (im.guarded)
        f.warn(cat(at, line, " (inside try:, so only a warning)"));
      else
        policy(w, f, at + line);
    };
    if (im.module.empty()) {
      report(cat("'from ", im.written, " import' climbs above the top-level package"));
      continue;
    }
    std::string top = im.module.substr(0, im.module.find('.'));
    if (!l.tops.count(top)) continue;
    // Every prefix is imported: a, a.b, a.b.c.
    std::string why;
    for (std::size_t dot = im.module.find('.'); why.empty() && dot != std::string::npos;
         dot = im.module.find('.', dot + 1))
      why = missing(l, im.module.substr(0, dot));
    if (why.empty()) why = missing(l, im.module);
    if (why.empty() && im.level > 0 && l.regular.count(im.module)) {
      // from . import name: a submodule, or something the package's __init__.py defines.
      std::string init = im.module;
      std::replace(init.begin(), init.end(), '.', '/');
      auto it = w.python_files.find(init + "/__init__.py");
      for (const auto& name : im.names) {
        if (name == "*" || !why.empty()) continue;
        std::string sub = cat(im.module, ".", name);
        if (l.modules.count(sub) || l.dirs.count(sub)) continue;
        // In the __init__.py itself, the import statement is one mention.
        int self = it != w.python_files.end() && it->first == path;
        if (it == w.python_files.end() ||
            (mentions(it->second, name) <= self && !l.open_packages.count(im.module)))
          why = missing(l, sub);
      }
    }
    if (!why.empty()) report(cat("imports ", why));
  }
}

// Every extension module (a CPython or abi3 suffix, or a PyInit_ export) exports
// PyInit_<its file name up to the first dot>.
void check_init_symbols(const LoadedWheel& w, Findings& f) {
  for (const auto& b : w.binaries) {
    std::string file = b.path.substr(b.path.rfind('/') + 1);
    if (!file.ends_with(".so")) continue;
    if (!b.extension && !cpython_suffix(file) && !is_abi3_module(file)) continue;
    std::string want = "PyInit_" + file.substr(0, file.find('.'));
    bool found = std::any_of(b.info.dynamic_symbols.begin(), b.info.dynamic_symbols.end(),
                             [&](const auto& s) { return s.defined && s.name == want; });
    if (!found)
      policy(w, f,
             cat(b.path, " does not export ", want,
                 ": Python could not import it under its file name"));
  }
}

}  // namespace

CheckResult check_imports(const LoadedWheel& w) {
  if (!w.zip) return skipped("imports", "the archive is unreadable");
  Layout l = layout_of(w);
  for (const auto& package : l.regular) {
    std::string init = package;
    std::replace(init.begin(), init.end(), '.', '/');
    auto it = w.python_files.find(init + "/__init__.py");
    if (it == w.python_files.end()) continue;
    l.string_words[package] = words_in_strings(it->second);
    if (defines_any_name(it->second)) l.open_packages.insert(package);
  }
  Findings f("imports");
  std::size_t count = 0;
  std::map<std::string, std::vector<PyImport>> imports;  // by site path
  for (const auto& [name, text] : w.python_files) {
    std::string path = site_path(w, name);
    if (path.empty()) continue;
    auto& list = imports[path] = scan_imports(text, package_of(path));
    count += list.size();
  }
  const std::set<std::string> elsewhere = platform_modules(imports);
  for (const auto& [path, list] : imports)
    if (!elsewhere.count(module_of(path))) check_file(l, w, path, list, f);
  std::size_t files = imports.size();
  for (const auto& name : w.python_skipped) f.warn(cat(name, " was not scanned: it is too large"));
  check_init_symbols(w, f);
  f.data()["python_files"] = files;
  f.data()["imports"] = count;
  return f.finish(cat(files, " Python file(s), ", count,
                      " import(s): every module imported from the wheel's own packages is in it; "
                      "every extension exports PyInit_<name>"));
}

}  // namespace kiln::validate
