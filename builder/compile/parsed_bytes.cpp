#include "compile/parsed_bytes.h"

#include <set>
#include <string_view>

#include "core/fs.h"

namespace kiln::compile {

std::vector<std::string> quoted_includes(const std::string& text, std::size_t most) {
  std::vector<std::string> out;
  for (std::size_t at = 0; at < text.size() && out.size() < most;) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + at, end - at);
    at = end + 1;
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string_view::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string_view::npos || line.substr(i, 7) != "include") continue;
    std::size_t open = line.find('"', i + 7);
    if (open == std::string_view::npos) continue;
    std::size_t close = line.find('"', open + 1);
    if (close == std::string_view::npos || close == open + 1) continue;
    if (line.substr(i + 7, open - i - 7).find_first_not_of(" \t") != std::string_view::npos)
      continue;
    out.emplace_back(line.substr(open + 1, close - open - 1));
  }
  return out;
}

double parsed_bytes(const fs::path& tree, const fs::path& source,
                    const std::vector<std::string>& include_dirs) {
  constexpr std::size_t kFiles = 512, kIncludes = 256;
  constexpr std::uint64_t kFileBytes = 4u << 20;
  std::error_code ec;
  const fs::path top = fs::canonical(tree, ec);
  if (ec || !fs::is_directory(top, ec)) return 0;
  std::vector<fs::path> dirs;
  for (const auto& d : include_dirs) dirs.push_back(top / d);
  std::set<fs::path> seen;
  std::vector<fs::path> todo = {top / source};
  double bytes = 0;
  while (!todo.empty() && seen.size() < kFiles) {
    const fs::path file = fs::weakly_canonical(todo.back(), ec);
    todo.pop_back();
    if (ec || !path_within(file, top) || !seen.insert(file).second) continue;
    auto text = read_file_beneath(top, file, kFileBytes);
    if (!text) continue;
    bytes += static_cast<double>(text->size());
    for (const auto& name : quoted_includes(*text, kIncludes)) {
      std::vector<fs::path> candidates = {file.parent_path() / name};
      for (const auto& d : dirs) candidates.push_back(d / name);
      for (const auto& c : candidates)
        if (fs::is_regular_file(c, ec)) {
          if (todo.size() < kFiles) todo.push_back(c);
          break;
        }
    }
  }
  return bytes;
}

}  // namespace kiln::compile
