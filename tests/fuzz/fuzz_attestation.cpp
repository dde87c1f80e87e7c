// A stranger's attestation as `kiln verify` reads it (from a colleague's export, an index): the
// DSSE envelopes of an .intoto.jsonl file, each payload read as an in-toto Statement, its predicate
// compared with the one a kiln.json gives. Whatever the input: no crash, an error with a message,
// nothing verifies under a key the input cannot have signed with, and every envelope read is
// written back as a line that reads back the same.
#include "attest/dsse.h"
#include "attest/statement.h"
#include "fuzz.h"

using kiln::fuzz::fail;

namespace {

const kiln::attest::PublicKey& fixed_key() {
  // RFC 8032's first test key: nobody fuzzing holds a signature of a random payload by it.
  static const kiln::attest::PublicKey key =
      kiln::attest::PublicKey::from_pem(
          "-----BEGIN PUBLIC KEY-----\n"
          "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
          "-----END PUBLIC KEY-----\n")
          .value();
  return key;
}

void check_envelope(const kiln::attest::Envelope& e) {
  if (kiln::attest::signed_by(e, fixed_key())) fail("a fuzzed envelope verified");
  auto again = kiln::attest::parse_envelopes(kiln::attest::envelope_line(e));
  if (!again || again->size() != 1 || (*again)[0].payload != e.payload ||
      (*again)[0].payload_type != e.payload_type ||
      (*again)[0].signatures.size() != e.signatures.size())
    fail("an envelope written back reads back otherwise");
  auto statement = kiln::attest::read_statement(e.payload);
  if (!statement) {
    if (statement.error().message.empty()) fail("an error without a message");
    return;
  }
  if (statement->subjects.empty()) fail("a statement without subjects was read");
  kiln::wheel::Provenance p;
  nlohmann::json mine = kiln::attest::slsa_predicate(p, fixed_key().id());
  if (kiln::attest::first_difference(statement->predicate, statement->predicate) != "")
    fail("a predicate differs from itself");
  (void)kiln::attest::first_difference(statement->predicate, mine);
}

}  // namespace

KILN_FUZZ_TARGET(attestation) {
  auto envelopes = kiln::attest::parse_envelopes(kiln::fuzz::text(data, size));
  if (!envelopes) {
    if (envelopes.error().message.empty()) fail("an error without a message");
    return 0;
  }
  for (const auto& e : *envelopes) check_envelope(e);
  return 0;
}
