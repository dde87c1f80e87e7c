#include "attest/dsse.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/json.h"
#include "core/strings.h"

namespace kiln::attest {

namespace {

// Standard or URL-safe base64, padded or not, as DSSE allows; nullopt for anything else.
std::optional<std::string> decode_base64(std::string_view text) {
  std::string standard(text);
  for (char& c : standard) {
    if (c == '-') c = '+';
    if (c == '_') c = '/';
  }
  while (standard.size() % 4) standard += '=';
  return base64_decode(standard);
}

// A string field of `j`, or why not.
Expected<std::string> string_field(const nlohmann::json& j, const char* name, bool required) {
  auto it = j.find(name);
  if (it == j.end()) {
    if (required) return Error::bad_input(cat("no \"", name, "\""));
    return std::string();
  }
  if (!it->is_string()) return Error::bad_input(cat("\"", name, "\" is not a string"));
  return it->get<std::string>();
}

Expected<std::string> base64_field(const nlohmann::json& j, const char* name) {
  KILN_TRY(std::string text, string_field(j, name, true));
  auto bytes = decode_base64(text);
  if (!bytes) return Error::bad_input(cat("\"", name, "\" is not base64"));
  return *bytes;
}

Expected<Envelope> parse_envelope(std::string_view line) {
  nlohmann::json j = parse_json(line, 8);
  if (j.is_discarded() || !j.is_object()) return Error::bad_input("not a JSON object");
  Envelope e;
  KILN_TRY(e.payload, base64_field(j, "payload"));
  KILN_TRY(e.payload_type, string_field(j, "payloadType", true));
  auto sigs = j.find("signatures");
  if (sigs == j.end() || !sigs->is_array() || sigs->empty() || sigs->size() > kMaxSignatures)
    return Error::bad_input(cat("\"signatures\" is not an array of 1 to ", kMaxSignatures));
  for (const auto& s : *sigs) {
    if (!s.is_object()) return Error::bad_input("a signature is not an object");
    Signature sig;
    KILN_TRY(sig.sig, base64_field(s, "sig"));
    KILN_TRY(sig.keyid, string_field(s, "keyid", false));
    e.signatures.push_back(std::move(sig));
  }
  return e;
}

}  // namespace

std::string pae(std::string_view payload_type, std::string_view payload) {
  return cat("DSSEv1 ", payload_type.size(), " ", payload_type, " ", payload.size(), " ", payload);
}

Expected<Envelope> sign_envelope(std::string payload, std::string_view payload_type,
                                 const SigningKey& key) {
  KILN_TRY(std::string sig, key.sign(pae(payload_type, payload)));
  Envelope e{std::move(payload), std::string(payload_type), {}};
  e.signatures.push_back({key.public_key().id(), std::move(sig)});
  return e;
}

std::string envelope_line(const Envelope& e) {
  nlohmann::json sigs = nlohmann::json::array();
  for (const auto& s : e.signatures) {
    nlohmann::json j = {{"sig", base64_encode(s.sig)}};
    if (!s.keyid.empty()) j["keyid"] = s.keyid;
    sigs.push_back(std::move(j));
  }
  nlohmann::json j = {
      {"payload", base64_encode(e.payload)}, {"payloadType", e.payload_type}, {"signatures", sigs}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Expected<std::vector<Envelope>> parse_envelopes(std::string_view text) {
  if (text.size() > kMaxAttestationBytes)
    return Error::bad_input(
        cat("an attestation of ", text.size(), " bytes (at most ", kMaxAttestationBytes, ")"));
  std::vector<Envelope> out;
  std::size_t number = 0;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = std::min(text.find('\n', at), text.size());
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    ++number;
    if (trim(line).empty()) continue;
    if (out.size() == kMaxEnvelopes)
      return Error::bad_input(cat("more than ", kMaxEnvelopes, " envelopes"));
    auto e = parse_envelope(line);
    if (!e) return Error::bad_input(cat("line ", number, ": ", e.error().message));
    out.push_back(std::move(*e));
  }
  if (out.empty()) return Error::bad_input("no envelope");
  return out;
}

bool signed_by(const Envelope& e, const PublicKey& key) {
  std::string message = pae(e.payload_type, e.payload);
  for (const auto& s : e.signatures)
    if ((s.keyid.empty() || s.keyid == key.id()) && key.verifies(message, s.sig)) return true;
  return false;
}

}  // namespace kiln::attest
