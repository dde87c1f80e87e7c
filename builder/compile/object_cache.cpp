#include "compile/object_cache.h"

#include <algorithm>

#include "core/fs.h"
#include "core/strings.h"

namespace kiln::compile {

namespace fs = std::filesystem;

namespace {
constexpr std::string_view kObjectSuffix = ".o";
constexpr std::string_view kDevicePartSuffix = ".dev";
constexpr std::string_view kManifestSuffix = ".deps";
constexpr std::string_view kDevicePartHeader = "kiln-device-part 1";
}  // namespace

std::string pack_files(const PackedFiles& files) {
  std::string out = cat(kDevicePartHeader, "\n");
  for (const auto& [path, data] : files) out += cat(path.string(), "\n", data.size(), "\n", data);
  return out;
}

Expected<PackedFiles> unpack_files(std::string_view data) {
  PackedFiles files;
  auto line = [&](std::string& out) {
    auto nl = data.find('\n');
    if (nl == std::string_view::npos) return false;
    out = std::string(data.substr(0, nl));
    data.remove_prefix(nl + 1);
    return true;
  };
  std::string header, path, size;
  if (!line(header) || header != kDevicePartHeader) return Error::failed("not a device part");
  while (!data.empty()) {
    if (!line(path) || !line(size) || size.empty() || size.size() > 12 ||
        !std::all_of(size.begin(), size.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return Error::failed("a damaged device part");
    std::size_t n = std::stoull(size);
    if (n > data.size()) return Error::failed("a truncated device part");
    files.emplace_back(path, std::string(data.substr(0, n)));
    data.remove_prefix(n);
  }
  return files;
}

namespace {
// A device part's files when they are `files`, in order (else nullopt: a miss).
std::optional<PackedFiles> device_part_files(const std::optional<std::string>& bytes,
                                             const std::vector<fs::path>& files) {
  if (!bytes) return std::nullopt;
  auto packed = unpack_files(*bytes);
  if (!packed || packed->size() != files.size()) return std::nullopt;
  for (std::size_t f = 0; f < files.size(); ++f)
    if ((*packed)[f].first != files[f]) return std::nullopt;
  return std::move(*packed);
}
}  // namespace

// The local entry, else the remote's, read and verified, nothing kept.
bool StoreObjectCache::has_object(const std::string& key) {
  return store_.peek_object(key, kObjectSuffix) || store_.load_shared_object(key, kObjectSuffix);
}

bool StoreObjectCache::has_device_part(const std::string& key, const std::vector<fs::path>& files) {
  if (device_part_files(store_.peek_object(key, kDevicePartSuffix), files)) return true;
  return device_part_files(store_.load_shared_object(key, kDevicePartSuffix), files).has_value();
}

std::optional<std::string> StoreObjectCache::peek_manifest(const std::string& command_key) {
  return store_.peek_object(command_key, kManifestSuffix);
}

bool StoreObjectCache::restore_object(const std::string& key, const fs::path& object) {
  auto bytes = store_.load_object(key, kObjectSuffix);
  return bytes && write_file_atomic(object, *bytes).has_value();
}

Expected<void> StoreObjectCache::store_object(const std::string& key, const fs::path& object) {
  KILN_TRY(std::string bytes, read_file(object));
  return store_.store_object(key, kObjectSuffix, bytes);
}

bool StoreObjectCache::restore_device_part(const std::string& key,
                                           const std::vector<fs::path>& files) {
  auto packed = device_part_files(store_.load_object(key, kDevicePartSuffix), files);
  if (!packed) return false;
  for (std::size_t f = 0; f < files.size(); ++f)
    if (!write_file_atomic(files[f], (*packed)[f].second)) return false;
  return true;
}

Expected<void> StoreObjectCache::store_device_part(const std::string& key,
                                                   const std::vector<fs::path>& files) {
  PackedFiles packed;
  for (const auto& f : files) {
    KILN_TRY(std::string data, read_file(f));
    packed.emplace_back(f, std::move(data));
  }
  return store_.store_object(key, kDevicePartSuffix, pack_files(packed));
}

std::optional<std::string> StoreObjectCache::load_manifest(const std::string& command_key) {
  return store_.load_object(command_key, kManifestSuffix);
}

Expected<void> StoreObjectCache::store_manifest(const std::string& command_key,
                                                std::string_view text) {
  return store_.store_object(command_key, kManifestSuffix, text);
}

std::optional<std::string> StoreObjectCache::load_shared_manifest(const std::string& command_key) {
  return store_.load_shared_object(command_key, kManifestSuffix);
}

bool StoreObjectCache::has_leases() const {
  return store_.shared() && !store_.shared()->readonly() && store_.shared()->has_leases();
}

bool StoreObjectCache::take_lease(const std::string& command_key) {
  return !has_leases() || store_.shared()->take_lease("objects/" + command_key);
}

void StoreObjectCache::release_lease(const std::string& command_key) {
  if (has_leases()) store_.shared()->release_lease("objects/" + command_key);
}

void StoreObjectCache::count_wait() {
  if (store_.shared()) store_.shared()->count_wait();
}

}  // namespace kiln::compile
