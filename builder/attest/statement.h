// The in-toto Statement v1 kiln signs for a wheel: its subject is the wheel (file name and sha256),
// its predicate SLSA Provenance v1, written from the wheel's kiln.json alone (and the signer's key
// id), so that anyone holding the wheel can write it again and compare (docs/verify.md, "What a
// signature says"):
//
//   buildDefinition.buildType           kBuildType
//   buildDefinition.externalParameters  what the user chose: kiln.json's inputs.package (the
//                                       manifest as the key hashed it) and inputs.target
//   buildDefinition.internalParameters  what kiln decided: the build key, key recipe, backend,
//                                       kiln.json format, archs, the other inputs (toolchain,
//                                       shards, manylinux, build environment), tools, platform,
//                                       "sandboxed" and the caveats
//   buildDefinition.resolvedDependencies every input with a digest: the source (sha256, or the git
//                                       commit), each patch, the torch wheel, the CUDA wheels or
//                                       Debian packages, the build environment's wheels
//   runDetails.builder                  id "urn:kiln:key:<key id>" (who vouches), kiln's version
//                                       and commit
//   runDetails.metadata.invocationId    the build key
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/expected.h"
#include "wheel/provenance.h"

namespace kiln::attest {

inline constexpr std::string_view kStatementType = "https://in-toto.io/Statement/v1";
inline constexpr std::string_view kProvenanceType = "https://slsa.dev/provenance/v1";
inline constexpr std::string_view kBuildType = "urn:kiln:build-type:wheel:v1";

// The SLSA Provenance v1 predicate of a wheel with this kiln.json, signed by the key `key_id`.
nlohmann::json slsa_predicate(const wheel::Provenance& provenance, std::string_view key_id);

// The Statement: one subject (`wheel_name`, {"sha256": `sha256`}), the SLSA predicate.
nlohmann::json make_statement(std::string_view wheel_name, std::string_view sha256,
                              nlohmann::json predicate);

// The bytes a Statement is signed as (compact JSON, keys sorted).
std::string statement_text(const nlohmann::json& statement);

// A signed payload read back: a JSON object of type kStatementType and predicateType
// kProvenanceType, with an array of subjects (each an object with a string "name" and an object
// "digest" of strings) and an object predicate. A BadInput error says what is wrong.
struct Subject {
  std::string name, sha256;  // sha256 "" when the digest has none
};
struct ReadStatement {
  std::vector<Subject> subjects;
  nlohmann::json predicate;
};
Expected<ReadStatement> read_statement(std::string_view payload);

// The first place where `a` and `b` differ, as a dotted path ("buildDefinition.internalParameters.
// build_key"), "" when they are equal.
std::string first_difference(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace kiln::attest
