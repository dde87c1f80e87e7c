#include "cache/entry.h"

#include "core/hash.h"
#include "core/json.h"
#include "core/strings.h"

namespace kiln::cache {

namespace {

// The string value of field `name`: anything but a bounded, printable UTF-8 string is an error.
Expected<std::string> string_value(const nlohmann::json& j, const char* name) {
  if (!j.is_string()) return Error::failed(cat("entry.json: '", name, "' is not a string"));
  const std::string& value = j.get_ref<const std::string&>();
  if (value.size() > kMaxEntryFieldBytes)
    return Error::failed(
        cat("entry.json: '", name, "' is longer than ", kMaxEntryFieldBytes, " bytes"));
  if (!is_valid_utf8(value) || !control_character(value).empty())
    return Error::failed(
        cat("entry.json: '", name, "' holds a control character or invalid UTF-8"));
  return value;
}

// One string field: absent is "", else its string_value.
Expected<std::string> string_field(const nlohmann::json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end()) return std::string();
  return string_value(*it, name);
}

// The caveats: absent is none; else an array of at most kMaxEntryCaveats string fields.
Expected<std::vector<std::string>> caveats_field(const nlohmann::json& doc) {
  std::vector<std::string> out;
  auto it = doc.find("caveats");
  if (it == doc.end()) return out;
  if (!it->is_array() || it->size() > kMaxEntryCaveats)
    return Error::failed(
        cat("entry.json: 'caveats' is not an array of at most ", kMaxEntryCaveats, " strings"));
  for (const auto& one : *it) {
    KILN_TRY(std::string text, string_value(one, "caveats"));
    out.push_back(std::move(text));
  }
  return out;
}

Expected<std::uint64_t> number_field(const nlohmann::json& doc, const char* name) {
  auto it = doc.find(name);
  if (it == doc.end()) return std::uint64_t{0};
  if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<std::int64_t>() >= 0))
    return Error::failed(cat("entry.json: '", name, "' is not a non-negative integer"));
  std::uint64_t value = it->get<std::uint64_t>();
  if (value > static_cast<std::uint64_t>(INT64_MAX))
    return Error::failed(cat("entry.json: '", name, "' is out of range"));
  return value;
}

}  // namespace

std::string attestation_file_name(std::string_view wheel) {
  return cat(wheel, kAttestationSuffix);
}

bool is_plain_wheel_name(std::string_view name) {
  return name.size() > 4 && name.size() <= 255 && name.ends_with(".whl") &&
         name.find('/') == std::string_view::npos && name.front() != '.' &&
         control_character(name).empty() && is_valid_utf8(name);
}

Expected<EntryInfo> parse_entry_info(std::string_view text) {
  if (text.size() > kMaxEntryJsonBytes)
    return Error::failed(cat("entry.json is larger than ", kMaxEntryJsonBytes, " bytes"));
  nlohmann::json doc = parse_json(text);
  if (doc.is_discarded() || !doc.is_object())
    return Error::failed("entry.json is not a JSON object");
  EntryInfo e;
  std::pair<const char*, std::string*> strings[] = {{"key", &e.key},
                                                    {"wheel", &e.wheel},
                                                    {"sha256", &e.sha256},
                                                    {"package", &e.package},
                                                    {"version", &e.version},
                                                    {"target", &e.target},
                                                    {"backend", &e.backend},
                                                    {"archs", &e.archs},
                                                    {"manifest_version", &e.manifest_version},
                                                    {"from", &e.from},
                                                    {"attestation", &e.attestation}};
  for (auto& [name, field] : strings) {
    KILN_TRY(*field, string_field(doc, name));
  }
  KILN_TRY(e.caveats, caveats_field(doc));
  KILN_TRY(e.size, number_field(doc, "size"));
  KILN_TRY(std::uint64_t at, number_field(doc, "committed_at"));
  e.committed_at = static_cast<std::int64_t>(at);
  if (!is_plain_wheel_name(e.wheel))
    return Error::failed(
        cat("entry.json names no plain .whl file ('", printable_excerpt(e.wheel), "')"));
  if (!is_sha256_hex(e.sha256)) return Error::failed("entry.json records no sha256");
  if (!e.attestation.empty() && e.attestation != attestation_file_name(e.wheel))
    return Error::failed(cat("entry.json's attestation is not ", attestation_file_name(e.wheel)));
  return e;
}

nlohmann::json EntryInfo::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  std::pair<const char*, const std::string*> strings[] = {{"key", &key},
                                                          {"wheel", &wheel},
                                                          {"sha256", &sha256},
                                                          {"package", &package},
                                                          {"version", &version},
                                                          {"target", &target},
                                                          {"backend", &backend},
                                                          {"archs", &archs},
                                                          {"manifest_version", &manifest_version},
                                                          {"from", &from},
                                                          {"attestation", &attestation}};
  for (const auto& [name, field] : strings)
    if (!field->empty()) j[name] = *field;
  if (!caveats.empty()) j["caveats"] = caveats;
  j["size"] = size;
  j["committed_at"] = committed_at;
  return j;
}

std::string EntryInfo::text() const {
  return to_json().dump(2) + "\n";
}

}  // namespace kiln::cache
