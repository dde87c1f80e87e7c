// A strict zip reader for wheels: every local header must agree with the central directory, no
// duplicate or escaping names, every entry inside the file; entries read back with CRC checked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/expected.h"

namespace kiln::archive {

// A file's bytes, mapped read-only (empty files need no mapping).
class MappedFile {
 public:
  static Expected<MappedFile> open(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&&) = delete;
  ~MappedFile();
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  MappedFile(void* data, std::size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

struct ZipEntry {
  std::string name;
  std::uint16_t flags = 0;   // general purpose bit flags
  std::uint16_t method = 0;  // 0 stored, 8 deflated
  std::uint32_t crc = 0;
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;
  std::uint64_t local_offset = 0;  // the local header
  std::uint64_t data_offset = 0;   // the (compressed) data
  std::uint32_t mode = 0;          // Unix mode from the external attributes (0 if not Unix)

  bool is_directory() const { return !name.empty() && name.back() == '/'; }
  bool is_symlink() const { return (mode & 0170000) == 0120000; }
  bool is_executable() const { return (mode & 0111) != 0; }
};

// Opening checks the whole structure; errors name the archive and, where there is one, the entry,
// e.g. "zip x.whl: entry 'a.so': local header CRC 1a2b3c4d disagrees with the central directory's
// 5e6f7a8b". Supported: stored and deflated entries, data descriptors, ZIP64. Refused: encryption,
// other methods, multi-disk archives, overlapping entries, bytes no entry accounts for (before,
// between or after the entries), a central directory that is not where the end record says.
class ZipReader {
 public:
  // `name` is used in messages (default: the file's name). Without `check_names`, entry names are
  // not held to zip_name_problem() (the caller checks them its own way); the structure still is.
  static Expected<ZipReader> open(const std::filesystem::path& path, std::string name = {},
                                  bool check_names = true);
  // Reads an archive held in memory (copied); `name` is used in messages.
  static Expected<ZipReader> from_bytes(std::string data, std::string name);

  const std::string& name() const { return name_; }
  std::string_view image() const;
  // Entries in central directory order.
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(std::string_view name) const;

  // The entry's bytes: inflated when deflated; the size and CRC must match the directory's. An
  // entry the directory says is larger than `max_size` is refused before anything is inflated,
  // and one that inflates past it (or past the directory's size) as soon as it does: never more
  // than `max_size` bytes are held. `limit` names the limit in the error ("16 MiB (the limit for
  // …)"; default: "the limit of N bytes").
  Expected<std::string> read(const ZipEntry& entry, std::uint64_t max_size = kMaxReadSize,
                             std::string_view limit = {}) const;
  static constexpr std::uint64_t kMaxReadSize = std::uint64_t(4) << 30;
  // The same, in chunks handed to `sink` (for hashing large entries without holding them).
  Expected<void> read_chunks(const ZipEntry& entry,
                             const std::function<void(std::string_view)>& sink,
                             std::uint64_t max_size = kMaxReadSize,
                             std::string_view limit = {}) const;

 private:
  struct Image;
  ZipReader(std::shared_ptr<const Image> image, std::string name)
      : image_(std::move(image)), name_(std::move(name)) {}
  Expected<void> parse(bool check_names = true);

  std::shared_ptr<const Image> image_;
  std::string name_;
  std::vector<ZipEntry> entries_;
};

// Checks a zip entry name: relative, '/'-separated, valid UTF-8, no NUL or backslash, no empty,
// "." or ".." components (a directory's trailing '/' aside). Returns "" when fine, else the reason.
std::string zip_name_problem(std::string_view name);

}  // namespace kiln::archive
