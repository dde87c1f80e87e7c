// Deterministic zip files (wheels): fixed times, modes and compression; no extra fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"
#include "core/fs.h"

namespace kiln::archive {

constexpr int kZipDeflateLevel = 6;  // part of the output's identity: changing it changes wheels

// Same entries in the same order give the same bytes: every mtime is SOURCE_DATE_EPOCH as a UTC
// DOS time, modes are 0644/0755, "version made by" is Unix 2.0, there are no extra fields,
// comments or data descriptors (sizes and CRC sit in the local header and equal the central
// directory's), non-empty files are deflated at kZipDeflateLevel, empty ones stored. No ZIP64:
// an entry or archive that would need it (over 4 GiB, over 65535 entries) is refused.
// libarchive's zip writer cannot do this (it always adds UT/ux extra fields and data
// descriptors, and uses local time), so this one writes the format over zlib.
class ZipWriter {
 public:
  // Writes through an AtomicFile: nothing appears at `path` until finish().
  static Expected<ZipWriter> create(const std::filesystem::path& path);
  ZipWriter(ZipWriter&&) = default;
  ZipWriter& operator=(ZipWriter&&) = delete;

  // Entries are written in the order added (the caller sorts). Names are relative, '/'-separated,
  // valid UTF-8, without empty, "." or ".." components or backslashes; each names a file once.
  Expected<void> add(std::string_view name, std::string_view data, bool executable = false);
  // Streams a file's content (never through a symlink); the exec bit comes from its mode. Each
  // chunk read is also handed to `on_chunk` when given (a RECORD hash, in one read).
  Expected<void> add_file(std::string_view name, const std::filesystem::path& source,
                          const std::function<void(std::string_view)>& on_chunk = {});
  // Central directory, end record, fsync and rename to the path.
  Expected<void> finish();

 private:
  struct Entry {
    std::string name;
    std::uint16_t flags = 0;
    std::uint16_t method = 0;
    std::uint32_t crc = 0;
    std::uint64_t compressed = 0;
    std::uint64_t size = 0;
    std::uint64_t offset = 0;
    std::uint32_t mode = 0;
  };
  // Hands out the entry's content in chunks; an empty chunk ends it.
  using Source = std::function<Expected<std::string_view>()>;

  ZipWriter(AtomicFile file, std::filesystem::path path);
  Expected<void> check_name(std::string_view name) const;
  Expected<void> write_entry(std::string_view name, std::uint64_t size, bool executable,
                             const Source& source);
  Expected<void> write(std::string_view bytes);  // buffered
  Expected<void> flush();
  Expected<void> patch(std::uint64_t at, std::string_view bytes);  // overwrite written bytes
  Error fail(Error error);

  AtomicFile file_;
  std::filesystem::path path_;
  std::vector<Entry> entries_;
  std::set<std::string, std::less<>> files_;
  std::set<std::string, std::less<>> dirs_;  // every proper prefix of a file name
  std::string pending_;                      // written bytes not yet handed to the file
  std::uint64_t flushed_ = 0;                // bytes handed to the file
  std::uint64_t offset_ = 0;                 // bytes written, flushed or not
  std::uint16_t dos_time_ = 0;
  std::uint16_t dos_date_ = 0;
  bool finished_ = false;
  bool broken_ = false;
};

}  // namespace kiln::archive
