"""An independent check of a wheel's attestation, with tools kiln did not write: DSSE and Ed25519
by securesystemslib (over `cryptography`), the in-toto Statement v1 and the SLSA Provenance v1
predicate parsed strictly into in-toto-attestation's own protobuf models (an unknown or mistyped
field is an error) and validated by its Statement and ResourceDescriptor rules.

    python attest_check.py WHEEL ATTESTATION PUBLIC_KEY [NAME]

Prints one JSON object: {"ok": true, "statement": ...} or {"ok": false, "error": "..."}; exits 0 or 1.
NAME is the wheel's file name (default: WHEEL's).
"""

import hashlib
import json
import os
import sys

from cryptography.hazmat.primitives.serialization import (Encoding, PublicFormat,
                                                          load_pem_public_key)
from google.protobuf import json_format
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

IN_TOTO = "application/vnd.in-toto+json"
SLSA = "https://slsa.dev/provenance/v1"


def check(wheel, attestation, public_key, name):
    with open(public_key, "rb") as f:
        pub = load_pem_public_key(f.read())
    der = pub.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    key = SSlibKey.from_crypto(pub, keyid=hashlib.sha256(der).hexdigest())
    with open(attestation) as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if not lines:
        raise ValueError("no envelope")
    envelope = Envelope.from_dict(json.loads(lines[0]))
    envelope.verify([key], 1)  # raises VerificationError
    if envelope.payload_type != IN_TOTO:
        raise ValueError(f"payload type {envelope.payload_type}")
    statement = json_format.Parse(envelope.payload, statement_pb2.Statement())
    Statement.copy_from_pb(statement).validate()
    if statement.predicate_type != SLSA:
        raise ValueError(f"predicate type {statement.predicate_type}")
    document = json.loads(envelope.payload)
    provenance = json_format.ParseDict(document["predicate"], provenance_pb2.Provenance())
    definition = provenance.build_definition
    if not definition.build_type or not provenance.run_details.builder.id:
        raise ValueError("buildType and builder.id are required by SLSA Provenance v1")
    if not definition.HasField("external_parameters"):
        raise ValueError("externalParameters is required by SLSA Provenance v1")
    for rd in list(definition.resolved_dependencies):
        ResourceDescriptor.copy_from_pb(rd).validate()
    with open(wheel, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if not any(s.name == name and s.digest.get("sha256") == digest for s in statement.subject):
        raise ValueError(f"no subject is {name} with sha256 {digest}")
    return document


def main():
    wheel, attestation, public_key = sys.argv[1:4]
    name = sys.argv[4] if len(sys.argv) > 4 else os.path.basename(wheel)
    try:
        document = check(wheel, attestation, public_key, name)
    except Exception as e:  # every failure is the answer "not verified", with its reason
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps({"ok": True, "statement": document}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
