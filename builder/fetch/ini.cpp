#include "fetch/ini.h"

#include "core/strings.h"

namespace kiln::fetch {

Expected<std::vector<IniEntry>> parse_ini(std::string_view text, const std::string& display) {
  std::vector<IniEntry> entries;
  std::string section;
  bool have_section = false;
  bool can_continue = false;   // the previous line was a key (or its continuation)
  std::size_t key_indent = 0;  // a continuation is indented deeper than its key
  int number = 0;
  for (const std::string& raw : split(text, "\n", /*skip_empty=*/false)) {
    ++number;
    std::string_view line = raw;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::string_view t = trim(line);
    if (t.empty()) {
      can_continue = false;
      continue;
    }
    if (t[0] == '#' || t[0] == ';') continue;
    std::size_t indent = line.find_first_not_of(" \t");
    if (can_continue && indent > key_indent) {
      std::string& value = entries.back().value;
      value += value.empty() ? "" : "\n";
      value += t;
      continue;
    }
    if (t[0] == '[') {
      std::size_t close = t.find(']');
      if (close == std::string_view::npos || !trim(t.substr(close + 1)).empty())
        return Error::bad_input(cat(display, ":", number, ": expected '[section]'"));
      section = std::string(trim(t.substr(1, close - 1)));
      have_section = true;
      can_continue = false;
      continue;
    }
    std::size_t delim = t.find_first_of("=:");
    if (delim == std::string_view::npos || delim == 0)
      return Error::bad_input(cat(display, ":", number, ": expected '[section]' or 'key = value'"));
    if (!have_section)
      return Error::bad_input(cat(display, ":", number, ": 'key = value' before any '[section]'"));
    entries.push_back({section, std::string(trim(t.substr(0, delim))),
                       std::string(trim(t.substr(delim + 1))), number});
    can_continue = true;
    key_indent = indent;
  }
  return entries;
}

}  // namespace kiln::fetch
