#include "wheel/writer.h"

#include <algorithm>
#include <set>

#include "archive/zip_writer.h"
#include "core/fault.h"
#include "core/hash.h"
#include "core/strings.h"
#include "packaging/wheel_name.h"

#ifndef KILN_VERSION
#define KILN_VERSION "0.0.0"
#endif

namespace kiln::wheel {

namespace {

std::string wheel_filename(const WheelSpec& spec) {
  std::string version = spec.version;
  std::replace(version.begin(), version.end(), '-', '_');
  return packaging::wheel_file_name(spec.distribution, version, spec.tag);
}

std::string dist_info_dir(const WheelSpec& spec) {
  return cat(spec.distribution, "-", spec.version, ".dist-info");
}

}  // namespace

Expected<std::filesystem::path> write_wheel_entries(const std::filesystem::path& path,
                                                    const std::string& dist_info,
                                                    const std::vector<WheelEntry>& files,
                                                    const std::vector<WheelEntry>& meta) {
  KILN_TRY(archive::ZipWriter zip, archive::ZipWriter::create(path));
  std::vector<RecordRow> rows;
  for (const auto* list : {&files, &meta}) {
    for (const auto& f : *list) {
      if (f.source.empty()) {
        KILN_CHECK(zip.add(f.path, f.data, f.executable));
        rows.push_back({f.path, record_hash(f.data), std::to_string(f.data.size())});
      } else {
        Sha256 hash;
        std::uint64_t size = 0;
        KILN_CHECK(zip.add_file(f.path, f.source, [&](std::string_view chunk) {
          hash.update(chunk);
          size += chunk.size();
        }));
        auto digest = hash.digest();
        rows.push_back({f.path, "sha256=" + base64_urlsafe_nopad(digest.data(), digest.size()),
                        std::to_string(size)});
      }
      fault_point("wheel");
    }
  }
  rows.push_back({dist_info + "/RECORD", "", ""});
  KILN_CHECK(zip.add(dist_info + "/RECORD", render_record(rows), false));
  KILN_CHECK(zip.finish());
  fault_point("wheel");
  return path;
}

Expected<std::filesystem::path> write_wheel(const WheelSpec& spec,
                                            const std::filesystem::path& out_dir) {
  const std::string info = dist_info_dir(spec);
  std::vector<WheelEntry> files = spec.files;
  std::sort(files.begin(), files.end(),
            [](const WheelEntry& a, const WheelEntry& b) { return a.path < b.path; });
  std::set<std::string> seen;
  for (const auto& f : files) {
    if (f.path.rfind(info + "/", 0) == 0)
      return Error::failed(cat("package file ", f.path, " collides with the .dist-info directory"));
    if (!seen.insert(f.path).second)
      return Error::failed(cat("file ", f.path, " is in the wheel twice"));
  }
  std::vector<WheelEntry> meta;
  meta.push_back({info + "/METADATA", spec.metadata.render(), false});
  meta.push_back({info + "/WHEEL",
                  render_wheel_file(cat("kiln ", KILN_VERSION), spec.root_is_purelib, spec.tag),
                  false});
  for (const auto& l : spec.license_files) {
    WheelEntry entry = l;
    entry.path = info + "/licenses/" + l.path;
    meta.push_back(std::move(entry));
  }
  if (!spec.provenance_json.empty())
    meta.push_back({info + "/kiln.json", spec.provenance_json, false});
  if (!spec.entry_points.empty())
    meta.push_back({info + "/entry_points.txt", spec.entry_points, false});
  std::sort(meta.begin(), meta.end(),
            [](const WheelEntry& a, const WheelEntry& b) { return a.path < b.path; });

  return write_wheel_entries(out_dir / wheel_filename(spec), info, files, meta);
}

}  // namespace kiln::wheel
