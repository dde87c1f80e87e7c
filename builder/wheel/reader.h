// Reads a wheel back: the files another build tool's wheel holds, for kiln's writer to write
// again (the setuptools backend). Through archive::ZipReader, with all of its checks.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "manifest/limits.h"

namespace kiln::wheel {

struct ReadEntry {
  std::string path;  // inside the wheel, '/'-separated
  std::string data;  // contents (a symlink's: its target)
  bool executable = false;
  bool symlink = false;
};

// Every file of the wheel at `path`, in the zip's order; directories are skipped.
Expected<std::vector<ReadEntry>> read_wheel_files(const std::filesystem::path& path);
// The same for a wheel held in memory; `name` is used in messages.
Expected<std::vector<ReadEntry>> read_wheel_files(std::string data, std::string name);

// The contents of the first file whose path `matches` (nullopt when none does), reading no other
// member (a wheel's kiln.json without inflating its libraries): a text file of a wheel that may
// be a stranger's (a remote cache's), refused past `max_bytes` (docs/manifest.md, "Limits").
Expected<std::optional<std::string>> read_wheel_file(
    const std::filesystem::path& path, const std::function<bool(std::string_view)>& matches,
    std::uint64_t max_bytes = manifest::kMaxWheelTextBytes);
// The wheel's <name>.dist-info/kiln.json (a top-level .dist-info's), as read_wheel_file reads it.
Expected<std::optional<std::string>> read_kiln_json(const std::filesystem::path& path);

}  // namespace kiln::wheel
