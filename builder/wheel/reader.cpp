#include "wheel/reader.h"

#include "archive/zip_reader.h"

namespace kiln::wheel {

namespace {

Expected<std::vector<ReadEntry>> entries_of(const archive::ZipReader& zip) {
  std::vector<ReadEntry> files;
  for (const auto& e : zip.entries()) {
    if (e.is_directory()) continue;
    KILN_TRY(std::string data, zip.read(e));
    files.push_back({e.name, std::move(data), e.is_executable(), e.is_symlink()});
  }
  return files;
}

}  // namespace

Expected<std::vector<ReadEntry>> read_wheel_files(const std::filesystem::path& path) {
  KILN_TRY(archive::ZipReader zip, archive::ZipReader::open(path));
  return entries_of(zip);
}

Expected<std::vector<ReadEntry>> read_wheel_files(std::string data, std::string name) {
  KILN_TRY(archive::ZipReader zip,
           archive::ZipReader::from_bytes(std::move(data), std::move(name)));
  return entries_of(zip);
}

Expected<std::optional<std::string>> read_wheel_file(
    const std::filesystem::path& path, const std::function<bool(std::string_view)>& matches,
    std::uint64_t max_bytes) {
  KILN_TRY(archive::ZipReader zip, archive::ZipReader::open(path));
  for (const auto& e : zip.entries()) {
    if (e.is_directory() || e.is_symlink() || !matches(e.name)) continue;
    KILN_TRY(std::string data,
             zip.read(e, max_bytes,
                      max_bytes == manifest::kMaxWheelTextBytes ? manifest::kWheelTextLimit : ""));
    return std::optional<std::string>(std::move(data));
  }
  return std::optional<std::string>();
}

Expected<std::optional<std::string>> read_kiln_json(const std::filesystem::path& path) {
  return read_wheel_file(path, [](std::string_view name) {
    return name.ends_with(".dist-info/kiln.json") && name.find('/') == name.rfind('/');
  });
}

}  // namespace kiln::wheel
