#include "packaging/name.h"

#include <algorithm>
#include <cctype>

#include "core/strings.h"

namespace kiln::packaging {

namespace {

bool is_name_char(char c) {
  return is_ascii_alnum(c) || c == '.' || c == '_' || c == '-';
}

}  // namespace

bool is_valid_project_name(std::string_view name) {
  return !name.empty() && is_ascii_alnum(name.front()) && is_ascii_alnum(name.back()) &&
         std::all_of(name.begin(), name.end(), is_name_char);
}

std::string normalize_name(std::string_view name) {
  std::string out;
  bool in_run = false;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (!in_run) out += '-';
      in_run = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_run = false;
    }
  }
  return out;
}

std::string file_name_part(std::string_view name) {
  std::string out = normalize_name(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace kiln::packaging
