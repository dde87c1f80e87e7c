#include "packaging/wheel_name.h"

#include <algorithm>

#include "core/strings.h"
#include "packaging/name.h"

namespace kiln::packaging {

namespace {

// Python's \w for the bytes of a UTF-8 name: ASCII letters, digits and '_', and any non-ASCII
// byte (a name of other letters).
bool is_word_char(char c) {
  return is_ascii_alnum(c) || c == '_' || static_cast<unsigned char>(c) >= 0x80;
}

// What packaging refuses in the fields it read: a name of word characters and '.', without "__";
// a version Version() takes; a build tag starting with a digit; each interpreter tag an
// identifier; no empty tag.
std::string problem(const WheelFileName& n) {
  if (n.distribution.empty() || n.distribution.find("__") != std::string::npos ||
      !std::all_of(n.distribution.begin(), n.distribution.end(),
                   [](char c) { return is_word_char(c) || c == '.'; }))
    return cat("the name '", printable_excerpt(n.distribution), "' is not a project name");
  if (!n.build.empty() && !is_ascii_digit(n.build[0]))
    return "the build tag does not start with a digit";
  for (const auto* list : {&n.python_tags, &n.abi_tags, &n.platform_tags})
    for (const auto& tag : *list)
      if (tag.empty()) return "an empty tag";
  for (const auto& py : n.python_tags)
    if (is_ascii_digit(py[0]) || !std::all_of(py.begin(), py.end(), is_word_char))
      return cat("the interpreter tag '", printable_excerpt(py), "' is not an identifier");
  return "";
}

}  // namespace

Expected<WheelFileName> parse_wheel_file_name(std::string_view filename) {
  auto bad = [&](const std::string& why) {
    return Error::bad_input(cat(printable_excerpt(filename), ": not a wheel file name (", why,
                                "; PEP 427 wants NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl)"));
  };
  if (!filename.ends_with(".whl")) return bad("it does not end in .whl");
  auto parts = split(filename.substr(0, filename.size() - 4), "-", /*skip_empty=*/false);
  if (parts.size() != 5 && parts.size() != 6)
    return bad(cat(parts.size(), " '-'-separated parts instead of 5 or 6"));
  WheelFileName n;
  n.distribution = parts[0];
  n.project = normalize_name(n.distribution);
  n.version = parts[1];
  if (parts.size() == 6) {
    n.build = parts[2];
    if (n.build.empty()) return bad("the build tag does not start with a digit");
  }
  std::size_t t = parts.size() - 3;
  n.python_tags = split(parts[t], ".", false);
  n.abi_tags = split(parts[t + 1], ".", false);
  n.platform_tags = split(parts[t + 2], ".", false);
  if (auto why = problem(n); !why.empty()) return bad(why);
  auto version = Version::parse(n.version);
  if (!version)
    return bad(cat("the version '", printable_excerpt(n.version), "' is not a PEP 440 version"));
  n.parsed_version = std::move(*version);
  return n;
}

std::string WheelFileName::tag_text() const {
  return cat(join(python_tags, "."), "-", join(abi_tags, "."), "-", join(platform_tags, "."));
}

std::vector<std::string> WheelFileName::tags() const {
  std::vector<std::string> out;
  for (const auto& py : python_tags)
    for (const auto& abi : abi_tags)
      for (const auto& pl : platform_tags) out.push_back(cat(py, "-", abi, "-", pl));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::string wheel_file_name(std::string_view name, std::string_view version, std::string_view tag) {
  return cat(file_name_part(name), "-", version, "-", tag, ".whl");
}

}  // namespace kiln::packaging
