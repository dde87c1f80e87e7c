// Test helpers for index/: real wheels (zip files with a METADATA) committed into a real cache
// layout.
#pragma once

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "archive/zip_writer.h"
#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "index/model.h"

namespace kiln::index::testutil {

inline std::string metadata_text(const std::string& name, const std::string& version,
                                 const std::string& requires_python = ">=3.9") {
  std::string out = cat("Metadata-Version: 2.1\nName: ", name, "\nVersion: ", version, "\n");
  if (!requires_python.empty()) out += cat("Requires-Python: ", requires_python, "\n");
  return out + "\nA description.\n";
}

// A wheel file named `filename` in `dir` whose dist-info holds `metadata`.
inline std::filesystem::path write_wheel(const std::filesystem::path& dir,
                                         const std::string& filename, const std::string& metadata,
                                         const std::string& payload = "x = 1\n") {
  packaging::WheelFileName w = index_wheel_name(filename).value();
  std::filesystem::create_directories(dir);
  std::filesystem::path path = dir / filename;
  auto zip = archive::ZipWriter::create(path).value();
  std::string info = cat(w.distribution, "-", w.version, ".dist-info/");
  zip.add(cat(w.distribution, "/__init__.py"), payload).value();
  zip.add(info + "METADATA", metadata).value();
  zip.add(info + "WHEEL",
          "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
      .value();
  zip.add(info + "RECORD", "").value();
  zip.finish().value();
  return path;
}

// A committed cache entry <cache>/wheels/<key>/{wheel, entry.json}; returns the entry directory.
inline std::filesystem::path add_entry(const std::filesystem::path& cache, const std::string& key,
                                       const std::string& target, const std::string& filename,
                                       std::int64_t committed_at,
                                       const std::string& payload = "x = 1\n") {
  packaging::WheelFileName w = index_wheel_name(filename).value();
  std::filesystem::path staging = cache / "tmp" / key;
  std::filesystem::path wheel =
      write_wheel(staging, filename, metadata_text(w.distribution, w.version), payload);
  nlohmann::json info = {{"key", key},
                         {"package", w.project},
                         {"version", w.version},
                         {"target", target},
                         {"wheel", filename},
                         {"sha256", sha256_file(wheel).value()},
                         {"size", std::filesystem::file_size(wheel)},
                         {"committed_at", committed_at}};
  std::ofstream(staging / "entry.json") << info.dump(2);
  std::filesystem::create_directories(cache / "wheels");
  std::filesystem::rename(staging, cache / "wheels" / key);
  return cache / "wheels" / key;
}

}  // namespace kiln::index::testutil
