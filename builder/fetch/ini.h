// A minimal INI reader for pip's configuration files and git's .gitmodules: "[section]" lines,
// "key = value" (or "key: value") lines, whole-line '#' and ';' comments, and lines indented
// deeper than their key continuing its value, as Python's configparser reads them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::fetch {

struct IniEntry {
  std::string section;  // as written between the brackets, trimmed
  std::string key;      // as written, trimmed
  std::string value;    // trimmed; continuation lines joined with '\n'
  int line = 0;         // 1-based line of the key
};

// Errors name `display` and the line: "FILE:3: expected '[section]' or 'key = value'".
Expected<std::vector<IniEntry>> parse_ini(std::string_view text, const std::string& display);

}  // namespace kiln::fetch
