#include "attest/wheel.h"

#include <algorithm>
#include <optional>

#include "attest/dsse.h"
#include "attest/statement.h"
#include "core/hash.h"
#include "core/strings.h"
#include "core/terminal.h"
#include "wheel/provenance.h"
#include "wheel/reader.h"

namespace kiln::attest {

namespace fs = std::filesystem;

namespace {

Expected<wheel::Provenance> provenance_of(const fs::path& wheel) {
  KILN_TRY(std::optional<std::string> text, wheel::read_kiln_json(wheel));
  if (!text) return Error::bad_input("the wheel has no kiln.json: not a wheel kiln built");
  return wheel::parse_provenance(*text);
}

std::string shown(std::string_view text) {
  return terminal_field(std::string(text), 200);
}

// The envelope of `envelopes` that `key` signed an in-toto payload in, or why none.
Expected<const Envelope*> signed_envelope(const std::vector<Envelope>& envelopes,
                                          const PublicKey& key) {
  std::vector<std::string> keyids;
  for (const auto& e : envelopes) {
    if (e.payload_type == kInTotoPayloadType && signed_by(e, key)) return &e;
    for (const auto& s : e.signatures)
      if (!s.keyid.empty()) keyids.push_back(shown(s.keyid.substr(0, 16)));
  }
  std::string named = keyids.empty() ? "" : cat(" (it names key ", join(keyids, ", "), ")");
  return Error::failed(
      cat("no signature of key ", key.id().substr(0, 16), " over an in-toto payload", named));
}

// The subject naming this wheel, or what the statement names instead.
Expected<void> check_subject(const ReadStatement& statement, std::string_view name,
                             const std::string& sha256) {
  for (const auto& s : statement.subjects)
    if (s.name == name && s.sha256 == sha256) return {};
  const Subject& first = statement.subjects.front();
  return Error::failed(cat("the statement vouches for ", shown(first.name), " (sha256 ",
                           shown(first.sha256), "), not ", shown(name), " (sha256 ", sha256, ")"));
}

Expected<void> check_predicate(const ReadStatement& statement, const fs::path& wheel,
                               const PublicKey& key) {
  KILN_TRY(wheel::Provenance p, provenance_of(wheel));
  nlohmann::json expected = slsa_predicate(p, key.id());
  std::string where = first_difference(statement.predicate, expected);
  if (where.empty()) return {};
  return Error::failed(cat("the predicate differs from the one the wheel's kiln.json gives, at ",
                           where == "." ? "its root" : shown(where)));
}

}  // namespace

std::string attestation_name(std::string_view wheel_name) {
  return cat(wheel_name, ".intoto.jsonl");
}

Expected<std::string> attest_wheel(const fs::path& wheel, std::string_view wheel_name,
                                   std::string_view sha256, const SigningKey& key) {
  KILN_TRY(wheel::Provenance p, provenance_of(wheel));
  nlohmann::json statement =
      make_statement(wheel_name, sha256, slsa_predicate(p, key.public_key().id()));
  KILN_TRY(Envelope envelope, sign_envelope(statement_text(statement), kInTotoPayloadType, key));
  std::string line = envelope_line(envelope);
  if (line.size() > kMaxAttestationBytes)
    return Error::failed(cat("the attestation of ", wheel_name, " would be ", line.size(),
                             " bytes, over the ", kMaxAttestationBytes, " readers take"));
  return line;
}

Expected<void> names_wheel(std::string_view attestation, std::string_view wheel_name,
                           const std::string& sha256) {
  KILN_TRY(std::vector<Envelope> envelopes, parse_envelopes(attestation));
  std::string why = "no envelope holds an in-toto statement";
  for (const auto& e : envelopes) {
    if (e.payload_type != kInTotoPayloadType) continue;
    auto statement = read_statement(e.payload);
    if (!statement) continue;
    auto named = check_subject(*statement, wheel_name, sha256);
    if (named) return {};
    why = named.error().message;
  }
  return Error::failed(why);
}

bool Verification::ok() const {
  return std::none_of(checks.begin(), checks.end(),
                      [](const Check& c) { return c.verdict == Check::Verdict::Fail; });
}

Verification verify_wheel(const fs::path& wheel, std::string_view wheel_name,
                          std::string_view attestation, const PublicKey& key) {
  Verification v;
  bool failed = false;
  // Runs `check` unless an earlier one failed, and records its verdict under `id`.
  auto step = [&](const char* id, const std::string& pass, auto check) {
    if (failed) {
      v.checks.push_back({id, Check::Verdict::Skip, "not checked: an earlier check failed"});
      return;
    }
    Expected<void> result = check();
    failed = !result;
    v.checks.push_back({id, result ? Check::Verdict::Pass : Check::Verdict::Fail,
                        result ? pass : result.error().message});
  };
  std::vector<Envelope> envelopes;
  const Envelope* envelope = nullptr;
  ReadStatement statement;
  step("attestation", "", [&]() -> Expected<void> {
    KILN_TRY(envelopes, parse_envelopes(attestation));
    return {};
  });
  if (!failed) v.checks.back().message = cat(envelopes.size(), " DSSE envelope(s)");
  step("signature", cat("signed by key ", key.id().substr(0, 16)), [&]() -> Expected<void> {
    KILN_TRY(envelope, signed_envelope(envelopes, key));
    return {};
  });
  step("statement", "an in-toto Statement v1 of SLSA Provenance v1", [&]() -> Expected<void> {
    KILN_TRY(statement, read_statement(envelope->payload));
    return {};
  });
  step("subject", cat("vouches for ", shown(wheel_name)), [&]() -> Expected<void> {
    KILN_TRY(v.sha256, sha256_file(wheel));
    return check_subject(statement, wheel_name, v.sha256);
  });
  step("predicate", "the wheel's kiln.json, as signed",
       [&]() -> Expected<void> { return check_predicate(statement, wheel, key); });
  return v;
}

}  // namespace kiln::attest
