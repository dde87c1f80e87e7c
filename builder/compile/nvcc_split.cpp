#include "compile/nvcc_split.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/strings.h"

namespace kiln::compile::nvcc {

namespace fs = std::filesystem;

namespace {

bool is_name_char(char c, bool first) {
  return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
         (!first && c >= '0' && c <= '9');
}

const std::string* lookup(const Env& vars, std::string_view name) {
  for (auto it = vars.rbegin(); it != vars.rend(); ++it)
    if (it->first == name) return &it->second;
  return nullptr;
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool has(const std::vector<std::string>& argv, std::string_view word) {
  return std::find(argv.begin() + 1, argv.end(), word) != argv.end();
}

// The value after `option` ("--stub_file_name X"), or "".
std::string value_of(const std::vector<std::string>& argv, std::string_view option) {
  for (std::size_t i = 1; i + 1 < argv.size(); ++i)
    if (argv[i] == option) return argv[i + 1];
  return "";
}

// The value of "option=X" ("--create=X"), or "".
std::string joined_value_of(const std::vector<std::string>& argv, std::string_view option) {
  std::string prefix = cat(option, "=");
  for (std::size_t i = 1; i < argv.size(); ++i)
    if (argv[i].rfind(prefix, 0) == 0) return argv[i].substr(prefix.size());
  return "";
}

// "--image3=kind=elf,sm=90,file=/x.cubin"
bool parse_image(const std::string& word, Image& image) {
  const std::string prefix = "--image3=";
  if (word.rfind(prefix, 0) != 0) return false;
  for (const auto& field : split(std::string_view(word).substr(prefix.size()), ",")) {
    auto eq = field.find('=');
    if (eq == std::string::npos) return false;
    std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    if (key == "kind")
      image.kind = value;
    else if (key == "sm")
      image.sm = value;
    else if (key == "file")
      image.file = value;
    else
      return false;
  }
  return !image.kind.empty() && !image.sm.empty() && !image.file.empty();
}

std::string image_word(const Image& image) {
  return cat("--image3=kind=", image.kind, ",sm=", image.sm, ",file=", image.file.string());
}

Error unsupported(std::string_view what) {
  return Error::failed(cat("nvcc --dryrun: ", what));
}

}  // namespace

Expected<std::vector<std::string>> shell_words(std::string_view line, const Env& vars) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  auto expand = [&](std::size_t& i) -> Expected<void> {
    // line[i] == '$'
    std::size_t start = i + 1;
    bool braced = start < line.size() && line[start] == '{';
    if (braced) ++start;
    std::size_t end = start;
    while (end < line.size() && is_name_char(line[end], end == start)) ++end;
    std::string_view name = line.substr(start, end - start);
    if (name.empty() || (braced && (end >= line.size() || line[end] != '}')))
      return unsupported(cat("cannot read '", printable_excerpt(line.substr(i), 20), "'"));
    const std::string* value = lookup(vars, name);
    if (!value) return unsupported(cat("a variable nvcc does not set: $", name));
    word += *value;
    i = braced ? end : end - 1;
    return {};
  };
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '"') {
      for (++i;; ++i) {
        if (i >= line.size()) return unsupported("an unterminated double quote");
        char d = line[i];
        if (d == '"') break;
        if (d == '\\' && i + 1 < line.size() &&
            (line[i + 1] == '"' || line[i + 1] == '\\' || line[i + 1] == '$' ||
             line[i + 1] == '`')) {
          word += line[++i];
        } else if (d == '$') {
          KILN_CHECK(expand(i));
        } else if (d == '`') {
          return unsupported("a backquote");
        } else {
          word += d;
        }
      }
    } else if (c == '\'') {
      auto close = line.find('\'', i + 1);
      if (close == std::string_view::npos) return unsupported("an unterminated single quote");
      word += line.substr(i + 1, close - i - 1);
      i = close;
    } else if (c == '$') {
      KILN_CHECK(expand(i));
    } else if (c == '\\' || c == '`' || c == ';' || c == '|' || c == '&' || c == '<' || c == '>' ||
               c == '(' || c == ')' || c == '*' || c == '?' || c == '[' || c == '~') {
      return unsupported(cat("a shell character '", std::string(1, c), "'"));
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

Expected<DryRun> parse_dryrun(std::string_view text) {
  DryRun run;
  for (const auto& raw : split(text, "\n")) {
    std::string_view line = raw;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.rfind("#$ ", 0) != 0) continue;
    line.remove_prefix(3);
    std::size_t name_end = 0;
    while (name_end < line.size() && is_name_char(line[name_end], name_end == 0)) ++name_end;
    if (name_end > 0 && name_end < line.size() && line[name_end] == '=') {
      run.env.emplace_back(std::string(line.substr(0, name_end)),
                           std::string(line.substr(name_end + 1)));
      continue;
    }
    KILN_TRY(std::vector<std::string> argv, shell_words(line, run.env));
    if (argv.empty()) continue;
    if (argv[0].find('/') == std::string::npos) {
      const std::string* path = lookup(run.env, "PATH");
      std::string found;
      for (const auto& dir : split(path ? *path : "", ":")) {
        fs::path candidate = fs::path(dir) / argv[0];
        if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) {
          found = candidate.string();
          break;
        }
      }
      if (found.empty()) return unsupported(cat("'", argv[0], "' is not on the PATH nvcc sets"));
      argv[0] = found;
    }
    run.commands.push_back(std::move(argv));
  }
  if (run.commands.empty()) return unsupported("no commands");
  return run;
}

Step classify(const std::vector<std::string>& argv) {
  std::string tool = basename_of(argv[0]);
  if (tool == "cicc") return Step::Cicc;
  if (tool == "ptxas") return Step::Ptxas;
  if (tool == "fatbinary") return Step::Fatbinary;
  if (tool == "cudafe++") return Step::Cudafe;
  if (tool == "nvlink" || tool == "bin2c" || tool == "nvcc") return Step::Other;
  bool device = std::any_of(argv.begin(), argv.end(), [](const std::string& w) {
    return w.rfind("-D__CUDA_ARCH__=", 0) == 0;
  });
  if (has(argv, "-E")) return device ? Step::DevicePreprocess : Step::HostPreprocess;
  if (has(argv, "-c")) return Step::HostCompile;
  return Step::Other;
}

std::string arch_list_value(std::string_view list_gpu_arch) {
  std::set<int> numbers;
  for (const auto& word : split(list_gpu_arch, " \t\r\n")) {
    if (word.rfind("compute_", 0) != 0) continue;
    std::string digits;
    for (char c : word.substr(8))
      if (c >= '0' && c <= '9')
        digits += c;
      else
        break;
    if (!digits.empty() && digits.size() <= 4) numbers.insert(std::stoi(digits) * 10);
  }
  std::vector<std::string> parts;
  for (int n : numbers) parts.push_back(std::to_string(n));
  return join(parts, ",");
}

bool set_arch_list(std::vector<std::string>& argv, const std::string& value) {
  bool found = false;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i].rfind("-D__CUDA_ARCH_LIST__=", 0) == 0) {
      argv[i] = "-D__CUDA_ARCH_LIST__=" + value;
      found = true;
    } else if (argv[i] == "-D" && i + 1 < argv.size() &&
               argv[i + 1].rfind("__CUDA_ARCH_LIST__=", 0) == 0) {
      argv[i + 1] = "__CUDA_ARCH_LIST__=" + value;
      found = true;
    }
  }
  return found;
}

Expected<DevicePart> device_part(const DryRun& dryrun, const std::string& arch_list) {
  DevicePart part;
  const auto& cmds = dryrun.commands;
  std::vector<Step> kinds;
  for (const auto& c : cmds) kinds.push_back(classify(c));
  bool shape = (kinds.size() == 3 || kinds.size() == 4) && kinds[0] == Step::DevicePreprocess &&
               kinds[1] == Step::Cicc && kinds.back() == Step::Fatbinary &&
               (kinds.size() == 3 || kinds[2] == Step::Ptxas);
  if (!shape)
    return unsupported("the device commands are not preprocess, cicc, [ptxas,] fatbinary");
  const auto& cicc = cmds[1];
  if (has(cicc, "--device-c")) return unsupported("relocatable device code (-rdc) is not split");
  if (!has(cicc, "--gen_module_id_file")) return unsupported("cicc does not write the module id");
  part.module_id = value_of(cicc, "--module_id_file_name");
  part.stub = value_of(cicc, "--stub_file_name");
  if (part.module_id.empty() || part.stub.empty() || part.stub.is_relative())
    return unsupported("cicc names no module id or stub file");
  for (const auto& word : cmds.back()) {
    Image image;
    if (parse_image(word, image)) part.images.push_back(std::move(image));
  }
  if (part.images.empty()) return unsupported("fatbinary embeds no image");
  for (std::size_t i = 0; i + 1 < cmds.size(); ++i) {
    std::vector<std::string> argv = cmds[i];
    if (i == 0 && !set_arch_list(argv, arch_list))
      return unsupported("the device preprocessor has no __CUDA_ARCH_LIST__");
    part.steps.push_back(std::move(argv));
  }
  return part;
}

Expected<HostPart> host_part(const DryRun& dryrun, const std::string& arch_list,
                             const std::vector<Image>& images,
                             const std::vector<std::string>& fatbinary_flags) {
  HostPart part;
  int seen[4] = {0, 0, 0, 0};  // preprocess, cudafe++, fatbinary, compile
  for (const auto& command : dryrun.commands) {
    Step kind = classify(command);
    std::vector<std::string> argv = command;
    switch (kind) {
      case Step::DevicePreprocess:
      case Step::Cicc:
      case Step::Ptxas:
        continue;  // the per-arch device parts
      case Step::HostPreprocess:
        if (seen[0]++ || seen[1] || !set_arch_list(argv, arch_list))
          return unsupported("an unexpected host preprocessor command");
        break;
      case Step::Cudafe: {
        if (seen[1]++ || !seen[0]) return unsupported("an unexpected cudafe++ command");
        if (has(argv, "--device-c"))
          return unsupported("relocatable device code (-rdc) is not split");
        auto gen = std::find(argv.begin(), argv.end(), "--gen_module_id_file");
        if (gen == argv.end()) return unsupported("cudafe++ does not write the module id");
        argv.erase(gen);  // it reads the device parts' module id instead
        part.module_id = value_of(argv, "--module_id_file_name");
        std::string stub = value_of(argv, "--stub_file_name");
        fs::path c_file = value_of(argv, "--gen_c_file_name");
        if (part.module_id.empty() || stub.empty() || c_file.empty())
          return unsupported("cudafe++ names no module id, stub or output file");
        part.stub = fs::path(stub).is_absolute() ? fs::path(stub) : c_file.parent_path() / stub;
        break;
      }
      case Step::Fatbinary: {
        part.fatbin_source = joined_value_of(argv, "--embedded-fatbin");
        part.fatbin = joined_value_of(argv, "--create");
        if (seen[2]++ || !seen[1] || part.fatbin_source.empty() || part.fatbin.empty() ||
            part.fatbin_source.is_relative() || part.fatbin.is_relative())
          return unsupported("an unexpected fatbinary command");
        // The fat binary becomes an object of its own (fatbin_assembly); the host compile
        // includes a reference to it instead (fatbin_reference).
        argv.erase(std::remove_if(
                       argv.begin(), argv.end(),
                       [](const std::string& w) { return w.rfind("--embedded-fatbin=", 0) == 0; }),
                   argv.end());
        std::size_t wanted = 0;
        for (auto& word : argv) {
          Image image;
          if (!parse_image(word, image)) continue;
          ++wanted;
          auto it = std::find_if(images.begin(), images.end(), [&](const Image& i) {
            return i.kind == image.kind && i.sm == image.sm;
          });
          if (it == images.end())
            return unsupported(
                cat("no device part made the ", image.kind, " image for sm ", image.sm));
          word = image_word(*it);
        }
        if (wanted != images.size())
          return unsupported("the device parts made images nvcc would not embed");
        argv.insert(argv.end(), fatbinary_flags.begin(), fatbinary_flags.end());
        part.fatbinary = std::move(argv);
        continue;
      }
      case Step::HostCompile:
        if (seen[3]++ || !seen[2]) return unsupported("an unexpected host compiler command");
        set_arch_list(argv, arch_list);
        break;
      case Step::Other:
        return unsupported(cat("a command kiln does not split: ", basename_of(argv[0])));
    }
    part.steps.push_back(std::move(argv));
  }
  if (part.steps.size() != 3 || part.fatbinary.empty())
    return unsupported("the host commands are not preprocess, cudafe++, fatbinary, compile");
  return part;
}

Expected<DevicePart> front_end_part(const DryRun& dryrun, const std::string& arch_list) {
  KILN_TRY(DevicePart part, device_part(dryrun, arch_list));
  if (!has(part.steps[1], "-O0")) return unsupported("the front end's cicc does not run at -O0");
  part.steps.resize(2);  // preprocess and cicc: the stub and module id are written; no SASS
  part.images.clear();
  return part;
}

std::string fatbin_reference(const std::string& symbol) {
  return cat(
      "#ifndef __SKIP_INTERNAL_FATBINARY_HEADERS\n#include \"fatbinary_section.h\"\n#endif\n",
      "#define __CUDAFATBINSECTION  \".nvFatBinSegment\"\n#define __CUDAFATBINDATASECTION  "
      "\".nv_fatbin\"\n",
      "#ifdef __cplusplus\nextern \"C\" {\n#endif\n", "extern const unsigned long long ", symbol,
      "[] __attribute__ ((visibility (\"hidden\")));\n",
      "static const __fatBinC_Wrapper_t __fatDeviceText __attribute__ ((aligned (8))) ",
      "__attribute__ ((section (__CUDAFATBINSECTION))) =\n\t{ 0x466243b1, 1, ", symbol, ", 0 };\n",
      "#ifdef __cplusplus\n}\n#endif\n");
}

std::string fatbin_assembly(const std::string& symbol, const fs::path& fatbin) {
  std::string path;
  for (char c : fatbin.string()) {
    if (c == '"' || c == '\\') path += '\\';
    path += c;
  }
  return cat("\t.section .nv_fatbin,\"a\"\n\t.align 8\n\t.globl ", symbol, "\n\t.hidden ", symbol,
             "\n\t.type ", symbol, ", @object\n", symbol, ":\n\t.incbin \"", path, "\"\n\t.size ",
             symbol, ", .-", symbol, "\n\t.section .note.GNU-stack,\"\",@progbits\n");
}

namespace {
// Line markers naming the stub itself (`# 1 "/keep/sm_90/x.cudafe1.stub.c"`, written before
// definitions the stub holds) name the pass's own directory.
std::string without_own_name(std::string_view stub) {
  std::vector<std::string> lines = split(stub, "\n", false);
  for (auto& line : lines)
    if (line.rfind("# ", 0) == 0 && line.ends_with(".stub.c\""))
      line = line.substr(0, line.find('"')) + "\"stub\"";
  return join(lines, "\n");
}

std::string without_temporaries(std::string_view stub) {
  std::string out;
  out.reserve(stub.size());
  for (std::size_t i = 0; i < stub.size();) {
    bool temp =
        stub.compare(i, 3, "__T") == 0 && i + 3 < stub.size() &&
        std::isdigit(static_cast<unsigned char>(stub[i + 3])) &&
        (i == 0 || !(std::isalnum(static_cast<unsigned char>(stub[i - 1])) || stub[i - 1] == '_'));
    if (!temp) {
      out += stub[i++];
      continue;
    }
    out += "__T";
    for (i += 3; i < stub.size() && std::isdigit(static_cast<unsigned char>(stub[i])); ++i) {
    }
  }
  return out;
}
}  // namespace

bool same_stub(std::string_view a, std::string_view b) {
  return a == b ||
         without_temporaries(without_own_name(a)) == without_temporaries(without_own_name(b));
}

std::string moved_stub(std::string_view stub, const fs::path& from, const fs::path& to) {
  const std::string old_name = cat("\"", from.string(), "\""),
                    new_name = cat("\"", to.string(), "\"");
  std::vector<std::string> lines = split(stub, "\n", false);
  for (auto& line : lines)
    if (line.rfind("# ", 0) == 0 && line.ends_with(old_name))
      line = line.substr(0, line.size() - old_name.size()) + new_name;
  return join(lines, "\n");
}

}  // namespace kiln::compile::nvcc
