#include "cache/remote.h"

#include "core/hash.h"
#include "core/log.h"
#include "core/strings.h"

namespace kiln::cache {

namespace {

constexpr std::string_view kMagic = "kiln-object 1 ";
constexpr std::size_t kHeader = kMagic.size() + 64 + 1;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// Seconds spent on the remote, counted however the call ends.
class Timed {
 public:
  explicit Timed(double& total) : total_(total), start_(now()) {}
  ~Timed() { total_ += now() - start_; }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  double& total_;
  double start_;
};

}  // namespace

std::string frame_entry(std::string_view bytes) {
  std::string entry;
  entry.reserve(kHeader + bytes.size());
  entry.append(kMagic).append(sha256_hex(bytes)).append("\n").append(bytes);
  return entry;
}

Expected<std::string_view> entry_payload(std::string_view entry) {
  if (entry.size() < kHeader || !entry.starts_with(kMagic) || entry[kHeader - 1] != '\n')
    return Error::failed(std::string(kNoEntryHeader));
  std::string_view recorded = entry.substr(kMagic.size(), 64);
  std::string_view bytes = entry.substr(kHeader);
  if (sha256_hex(bytes) != recorded)
    return Error::failed(
        cat("its bytes do not match the sha256 its header records (", recorded, ")"));
  return bytes;
}

std::uint64_t remote_object_bound(std::string_view suffix) {
  return suffix == ".deps" ? kMaxRemoteManifest : kMaxRemoteObject;
}

std::string remote_object_name(const std::string& key, std::string_view suffix) {
  return cat("objects/", key.substr(0, 2), "/", key, suffix);
}

std::string remote_wheel_info_name(const std::string& key) {
  return cat("wheels/", key, "/entry.json");
}

std::string remote_wheel_name(const std::string& key, const std::string& wheel) {
  return cat("wheels/", key, "/", wheel);
}

nlohmann::json SharedStats::to_json() const {
  return {{"hits", hits},
          {"misses", misses},
          {"corrupt", corrupt},
          {"stores", stores},
          {"bytes_read", bytes_read},
          {"bytes_written", bytes_written},
          {"seconds", seconds},
          {"leases_taken", leases_taken},
          {"leases_waited", leases_waited},
          {"failed", failed}};
}

void SharedCache::off(const Error& why) {
  if (stats_.failed) return;
  stats_.failed = true;
  // An interrupt is not the remote's fault: no warning; the build stops (exit 130) at its next
  // check_interrupted().
  if (why.kind == ErrorKind::Interrupted) return;
  log::warn(cat("remote cache ", remote_->describe(), ": ", why.message,
                "; building without it for the rest of this run"));
}

std::optional<std::string> SharedCache::get(const std::string& name, std::uint64_t max_bytes) {
  if (!on()) return std::nullopt;
  Timed timed(stats_.seconds);
  auto corrupt = [&](const std::string& why) {
    stats_.corrupt++;
    stats_.misses++;
    log::warn(cat("remote cache ", remote_->describe(), ": ", name, ": ", why, "; a miss",
                  readonly_ ? "" : ", stored again once built"));
    return std::nullopt;
  };
  auto got = remote_->get(name, max_bytes + kHeader);
  if (!got) {
    off(got.error());
    return std::nullopt;
  }
  if (got->kind == Fetched::Kind::Missing) {
    stats_.misses++;
    return std::nullopt;
  }
  if (got->kind == Fetched::Kind::TooLarge) return corrupt(got->why);
  stats_.bytes_read += got->bytes.size();
  if (got->bytes.size() > max_bytes + kHeader)  // a backend that did not bound its reply
    return corrupt(cat("larger than the ", max_bytes, " bytes such an entry may have"));
  auto payload = entry_payload(got->bytes);
  if (!payload) return corrupt(payload.error().message);
  stats_.hits++;
  return std::string(*payload);
}

void SharedCache::put(const std::string& name, std::string_view bytes) {
  if (!on() || readonly_) return;
  Timed timed(stats_.seconds);
  std::string entry = frame_entry(bytes);
  if (auto stored = remote_->put(name, entry); !stored) {
    off(stored.error());
    return;
  }
  stats_.stores++;
  stats_.bytes_written += entry.size();
}

bool SharedCache::take_lease(const std::string& name) {
  if (!has_leases()) return true;
  Timed timed(stats_.seconds);
  auto taken = remote_->take_lease(name, lease_ttl_);
  if (!taken) {
    off(taken.error());
    return true;
  }
  if (*taken) stats_.leases_taken++;
  return *taken;
}

void SharedCache::release_lease(const std::string& name) {
  if (!has_leases()) return;
  Timed timed(stats_.seconds);
  if (auto released = remote_->release_lease(name); !released) off(released.error());
}

}  // namespace kiln::cache
