#include "wheel/pack.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/strings.h"
#include "packaging/name.h"
#include "packaging/version.h"
#include "wheel/metadata.h"
#include "wheel/writer.h"

namespace kiln::wheel {

namespace fs = std::filesystem;

namespace {

constexpr std::uintmax_t kMaxMetadataBytes = 1 << 20;

Expected<std::string> read_small(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(fs::symlink_status(path, ec)))
    return Error::bad_input(cat(path.string(), ": missing (or not a regular file)"));
  if (fs::file_size(path, ec) > kMaxMetadataBytes)
    return Error::bad_input(cat(path.string(), ": larger than 1 MiB"));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) return Error::failed(cat("cannot read ", path.string()));
  return text.str();
}

// The one <name>-<version>.dist-info folder at the top of dir.
Expected<std::string> find_dist_info(const fs::path& dir) {
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.ends_with(".dist-info")) found.push_back(name);
  }
  if (ec) return Error::bad_input(cat(dir.string(), ": ", ec.message()));
  if (found.size() != 1)
    return Error::bad_input(
        cat(dir.string(), ": needs exactly one <name>-<version>.dist-info, has ", found.size()));
  return found.front();
}

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

// "py3-none-manylinux_2_28_x86_64" from WHEEL's Tag lines; several lines are compressed into
// one dotted tag set, which must then be their full product.
Expected<std::string> tag_set(const std::string& wheel_text) {
  std::vector<std::string> parts[3];
  size_t tags = 0;
  for (const auto& tag : parse_metadata(wheel_text).all("Tag")) {
    auto pieces = split(tag, "-", false);
    if (pieces.size() != 3 || std::ranges::any_of(pieces, [](const std::string& p) {
          return p.empty() || !std::ranges::all_of(p, is_name_char);
        }))
      return Error::bad_input(cat("WHEEL: Tag '", tag, "' is not interpreter-abi-platform"));
    for (int i = 0; i < 3; ++i)
      if (std::ranges::find(parts[i], pieces[i]) == parts[i].end()) parts[i].push_back(pieces[i]);
    ++tags;
  }
  if (tags == 0) return Error::bad_input("WHEEL: no Tag line");
  if (tags != parts[0].size() * parts[1].size() * parts[2].size())
    return Error::bad_input("WHEEL: the Tag lines are not one compressed tag set");
  return cat(join(parts[0], "."), "-", join(parts[1], "."), "-", join(parts[2], "."));
}

// Every regular file under dir, by its '/'-separated path; links and special files refused.
Expected<std::vector<WheelEntry>> list_files(const fs::path& dir) {
  std::vector<WheelEntry> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    fs::file_status status = it->symlink_status(ec);
    if (ec) break;
    std::string rel = it->path().lexically_relative(dir).generic_string();
    if (fs::is_directory(status)) continue;
    if (!fs::is_regular_file(status))
      return Error::bad_input(cat(it->path().string(), ": not a regular file (links are refused)"));
    files.push_back({rel, "", false, it->path()});
  }
  if (ec) return Error::bad_input(cat(dir.string(), ": ", ec.message()));
  std::ranges::sort(files, {}, &WheelEntry::path);
  return files;
}

}  // namespace

Expected<fs::path> pack_wheel(const fs::path& dir, const fs::path& out_dir) {
  KILN_TRY(std::string info, find_dist_info(dir));
  std::string stem = info.substr(0, info.size() - std::string_view(".dist-info").size());
  size_t dash = stem.find('-');
  std::string name = stem.substr(0, dash),
              version = dash == std::string::npos ? "" : stem.substr(dash + 1);
  if (name.empty() || version.empty() || !std::ranges::all_of(name, is_name_char) ||
      !packaging::is_valid_project_name(name) || version.find('-') != std::string::npos)
    return Error::bad_input(cat(printable_excerpt(info, 200), ": not <name>-<version>.dist-info"));
  // The version of a wheel's file name is PEP 440's normalised form (what kiln validate, pip and
  // uv read back): "1 0", "1$(id)" or ".." would make a wheel that nothing installs.
  auto parsed = packaging::Version::parse(version);
  if (!parsed || parsed->str() != version)
    return Error::bad_input(cat(printable_excerpt(info, 200), ": '", printable_excerpt(version, 80),
                                "' is not a normalised PEP 440 version",
                                parsed ? cat(" (write ", parsed->str(), ")") : std::string()));
  KILN_TRY(std::string metadata_text, read_small(dir / info / "METADATA"));
  ParsedMetadata metadata = parse_metadata(metadata_text);
  if (packaging::normalize_name(metadata.first("Name")) != packaging::normalize_name(name) ||
      metadata.first("Version") != version)
    return Error::bad_input(cat(info, "/METADATA: Name '", metadata.first("Name"),
                                "' and Version '", metadata.first("Version"),
                                "' do not match the folder's name"));
  KILN_TRY(std::string wheel_text, read_small(dir / info / "WHEEL"));
  KILN_TRY(std::string tags, tag_set(wheel_text));
  KILN_TRY(std::vector<WheelEntry> all, list_files(dir));
  std::vector<WheelEntry> files, meta;
  for (auto& f : all) {
    if (f.path == info + "/RECORD") continue;
    (f.path.starts_with(info + "/") ? meta : files).push_back(std::move(f));
  }
  return write_wheel_entries(out_dir / cat(stem, "-", tags, ".whl"), info, files, meta);
}

}  // namespace kiln::wheel
