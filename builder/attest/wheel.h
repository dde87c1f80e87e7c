// A wheel's attestation: signed when kiln builds it (attest_wheel), checked by anyone who holds the
// wheel, the attestation and the signer's public key (verify_wheel, `kiln verify`). The file sits
// beside the wheel as `<wheel>.intoto.jsonl` in a cache entry, on `kiln serve` and in an export.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "attest/key.h"
#include "core/expected.h"

namespace kiln::attest {

// The attestation's file name beside `wheel_name`.
std::string attestation_name(std::string_view wheel_name);

// The attestation of the wheel at `wheel` (named `wheel_name`, its sha256 `sha256`): the SLSA
// Statement of its kiln.json in a DSSE envelope signed by `key`, as one line. A wheel without a
// readable kiln.json is an error.
Expected<std::string> attest_wheel(const std::filesystem::path& wheel, std::string_view wheel_name,
                                   std::string_view sha256, const SigningKey& key);

// One check of verify_wheel, in this order: "attestation" (the file parses as DSSE envelopes),
// "signature" (one envelope of in-toto's payload type is signed by the key), "statement" (its
// payload is an in-toto Statement v1 of SLSA Provenance v1), "subject" (one subject is this wheel:
// its file name and sha256), "predicate" (the predicate is the one the wheel's kiln.json gives).
// A check after a failed one is skipped.
struct Check {
  enum class Verdict { Pass, Fail, Skip };
  std::string id;
  Verdict verdict = Verdict::Pass;
  std::string message;  // one line
};
struct Verification {
  std::string sha256;  // of the wheel
  std::vector<Check> checks;
  bool ok() const;
};

// Whether one envelope of `attestation` is an in-toto Statement whose subject is `wheel_name` with
// `sha256`, signed by someone (no key is checked): what a remote cache's copy of the builder's
// attestation must be before it is kept beside the wheel it fetched; the error says why not.
Expected<void> names_wheel(std::string_view attestation, std::string_view wheel_name,
                           const std::string& sha256);

// Whether `attestation` vouches, by `key`, for the wheel at `wheel` under the name `wheel_name`.
Verification verify_wheel(const std::filesystem::path& wheel, std::string_view wheel_name,
                          std::string_view attestation, const PublicKey& key);

}  // namespace kiln::attest
