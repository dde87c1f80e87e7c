// Ed25519 keys for signing attestations, through OpenSSL. The private key lives in a PEM file
// (PKCS#8, unencrypted) the user names; kiln reads it into this process only to sign, never copies,
// prints or hands it to a build's sandbox, and refuses a file others can read. A public key is PEM
// (SubjectPublicKeyInfo), as `openssl pkey -pubout` writes it. A key's id is the sha256 of its
// public key's DER SubjectPublicKeyInfo, in lowercase hex (`openssl pkey -pubin -outform DER |
// sha256sum`): what a DSSE signature's "keyid" names.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "core/expected.h"

struct evp_pkey_st;  // OpenSSL's EVP_PKEY

namespace kiln::attest {

// Caps on what a key file may hold (a PEM Ed25519 key is about 120 bytes).
inline constexpr std::uint64_t kMaxKeyFileBytes = 16 * 1024;

class PublicKey {
 public:
  // An Ed25519 public key in PEM; any other text or key type is a BadInput error.
  static Expected<PublicKey> from_pem(std::string_view pem);
  // The PEM file `file` (at most kMaxKeyFileBytes), with errors naming it.
  static Expected<PublicKey> load(const std::filesystem::path& file);
  const std::string& id() const { return id_; }
  std::string pem() const;
  // Whether `signature` (64 bytes) is this key's Ed25519 signature of `message`.
  bool verifies(std::string_view message, std::string_view signature) const;

 private:
  friend class SigningKey;
  explicit PublicKey(std::shared_ptr<evp_pkey_st> key);
  std::shared_ptr<evp_pkey_st> key_;
  std::string id_;
};

class SigningKey {
 public:
  // A new key from OpenSSL's random generator.
  static Expected<SigningKey> generate();
  // The private key of `file`: a regular file (a link to one is followed) of this user that no one
  // else may read or write (mode 0600 or 0400), holding an Ed25519 PKCS#8 PEM key. Errors name the
  // file and what is wrong, never its contents.
  static Expected<SigningKey> load(const std::filesystem::path& file);
  const PublicKey& public_key() const { return public_; }
  // The Ed25519 signature (64 bytes) of `message`; the same message always gets the same one.
  Expected<std::string> sign(std::string_view message) const;
  // Writes the private key to `file` (created: an existing file is an error, never replaced) with
  // mode 0600, and its public key to `file`.pub (mode 0644, created likewise), each fsynced.
  Expected<void> write(const std::filesystem::path& file) const;

 private:
  explicit SigningKey(std::shared_ptr<evp_pkey_st> key);
  std::shared_ptr<evp_pkey_st> key_;
  PublicKey public_;
};

}  // namespace kiln::attest
