// DSSE envelopes (the Dead Simple Signing Envelope of secure-systems-lab, v1.0): a payload, its
// type, and signatures over the pre-authentication encoding PAE(type, payload). What kiln writes
// beside a wheel is a file of JSON lines, one envelope each (the `.intoto.jsonl` layout of SLSA's
// generators); kiln writes one. Envelopes come from strangers (an index, a colleague's export):
// the reader bounds the text and the counts, checks every field's type, and never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attest/key.h"
#include "core/expected.h"

namespace kiln::attest {

inline constexpr std::string_view kInTotoPayloadType = "application/vnd.in-toto+json";
// Caps on an attestation file: its bytes, envelopes (lines) and signatures per envelope.
inline constexpr std::uint64_t kMaxAttestationBytes = 1024 * 1024;
inline constexpr std::size_t kMaxEnvelopes = 16;
inline constexpr std::size_t kMaxSignatures = 16;

struct Signature {
  std::string keyid;  // "" when the envelope names none
  std::string sig;    // raw bytes
};

struct Envelope {
  std::string payload;  // raw bytes
  std::string payload_type;
  std::vector<Signature> signatures;
};

// "DSSEv1 <len(type)> <type> <len(payload)> <payload>".
std::string pae(std::string_view payload_type, std::string_view payload);

// `payload` of `payload_type` signed by `key` (its id as the keyid).
Expected<Envelope> sign_envelope(std::string payload, std::string_view payload_type,
                                 const SigningKey& key);

// One envelope as one JSON line (payload and sigs in standard base64) and a newline.
std::string envelope_line(const Envelope& envelope);

// The envelopes of an attestation file: one JSON object per non-empty line, each with a string
// "payload" and "payloadType" and an array of 1 to kMaxSignatures "signatures" (objects with a
// string "sig", an optional string "keyid"); base64 standard or URL-safe, padded or not. Other
// fields are ignored. A BadInput error names the line and what is wrong.
Expected<std::vector<Envelope>> parse_envelopes(std::string_view text);

// Whether one of the envelope's signatures is `key`'s over PAE(type, payload): a signature that
// names a keyid is tried only with the key of that id.
bool signed_by(const Envelope& envelope, const PublicKey& key);

}  // namespace kiln::attest
