// Assembles a wheel: package files, .dist-info (METADATA, WHEEL, licenses, provenance, RECORD
// last), written deterministically through archive::ZipWriter.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/expected.h"
#include "wheel/metadata.h"

namespace kiln::wheel {

struct WheelEntry {
  std::string path;  // inside the wheel, '/'-separated
  std::string data;  // contents, unless `source` is set
  bool executable = false;
  // When set, the contents are streamed from this file (never held in memory) and the exec bit
  // comes from its mode.
  std::filesystem::path source;
};

struct WheelSpec {
  std::string distribution;  // escaped name for file names: causal_conv1d
  std::string version;       // with local label
  std::string tag;           // "cp311-cp311-manylinux_2_28_x86_64" or "py3-none-any"
  bool root_is_purelib = false;
  CoreMetadata metadata;
  std::vector<WheelEntry> files;          // package files (any order; sorted on write)
  std::vector<WheelEntry> license_files;  // path = name under .dist-info/licenses/
  std::string provenance_json;            // written as .dist-info/kiln.json
  std::string entry_points;               // written as .dist-info/entry_points.txt when set
};

// Writes <out_dir>/<wheel filename> atomically and returns its path.
Expected<std::filesystem::path> write_wheel(const WheelSpec& spec,
                                            const std::filesystem::path& out_dir);

// The zip itself, for write_wheel and pack_wheel: `files` then `meta` (each already sorted), then
// <dist_info>/RECORD naming them all; atomically at `path`.
Expected<std::filesystem::path> write_wheel_entries(const std::filesystem::path& path,
                                                    const std::string& dist_info,
                                                    const std::vector<WheelEntry>& files,
                                                    const std::vector<WheelEntry>& meta);

}  // namespace kiln::wheel
