// entry.json: what a committed wheel entry records, typed, with one reader for the local cache and
// the remote alike (as kiln.json has wheel::Provenance). A cache or a remote may be a stranger's:
// every field is checked for its type, its length and control characters before kiln uses it, and
// a document that fails is an unusable entry (local) or a corrupt miss (remote), never a crash.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/expected.h"

namespace kiln::cache {

// Caps on entry.json: the whole document, and each string field.
inline constexpr std::size_t kMaxEntryJsonBytes = 64 * 1024;
inline constexpr std::size_t kMaxEntryFieldBytes = 1024;
inline constexpr std::size_t kMaxEntryCaveats = 8;

struct EntryInfo {
  std::string key;     // the build key (64 hex digits)
  std::string wheel;   // a plain *.whl file name
  std::string sha256;  // of the wheel (64 lowercase hex digits)
  std::uint64_t size = 0;
  std::string package, version, target, backend, manifest_version;
  std::string archs;              // canonical ("sm_90;sm_120"), "" for pure packages
  std::string from;               // the remote a hit came from, "" when built here
  std::int64_t committed_at = 0;  // seconds since the epoch
  // A build's reasons its bytes may differ from the same build's elsewhere
  // (pipeline::ItemResult::caveats): at most kMaxEntryCaveats strings like the others.
  std::vector<std::string> caveats;
  // The signed attestation beside the wheel (attestation_file_name(wheel)), "" when unsigned.
  std::string attestation;

  nlohmann::json to_json() const;  // the fields that are set (strings non-empty)
  std::string text() const;        // to_json() as entry.json holds it
};

// Reads an entry.json: a JSON object of at most kMaxEntryJsonBytes whose known fields have their
// type (strings of at most kMaxEntryFieldBytes without control characters or invalid UTF-8;
// `size` and `committed_at` non-negative integers; `caveats` an array of such strings), `wheel` a
// plain *.whl name and `sha256` 64 hex digits (the key, when present, is compared by the reader
// with the one it asked for). Unknown fields are ignored (and never copied). An error says which
// field is wrong, in one line.
Expected<EntryInfo> parse_entry_info(std::string_view text);

// The attestation of a wheel (attest/wheel.h) beside it, in an entry, on `kiln serve` and in an
// export: "<wheel>.intoto.jsonl", the JSON-lines file of DSSE envelopes SLSA's generators write.
inline constexpr std::string_view kAttestationSuffix = ".intoto.jsonl";
std::string attestation_file_name(std::string_view wheel);
// The largest attestation file kiln writes or reads (attest/dsse.h's kMaxAttestationBytes).
inline constexpr std::uint64_t kMaxAttestationBytes = 1024 * 1024;

// A wheel file name an entry may name: a plain *.whl name (at most 255 bytes, no '/', not
// starting with '.', no control characters), nothing that leads elsewhere.
bool is_plain_wheel_name(std::string_view name);

}  // namespace kiln::cache
