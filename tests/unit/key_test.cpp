#include "attest/key.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"

namespace kiln::attest {

namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  return out;
}

std::string pem(std::string_view label, std::string_view der) {
  return cat("-----BEGIN ", label, "-----\n", base64_encode(der), "\n-----END ", label, "-----\n");
}

// RFC 8032, section 7.1, TEST 1: the secret key, its public key, and the empty message's signature.
constexpr std::string_view kSecret =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
constexpr std::string_view kPublic =
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
constexpr std::string_view kSignature =
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b4"
    "6bd25bf5f0595bbe24655141438e7a100b";
// PKCS#8 and SubjectPublicKeyInfo DER around a raw Ed25519 key (RFC 8410).
constexpr std::string_view kPkcs8Prefix = "302e020100300506032b657004220420";
constexpr std::string_view kSpkiPrefix = "302a300506032b6570032100";

// An EC P-256 private key: a PEM key kiln must refuse (it signs with Ed25519 only).
constexpr std::string_view kEcKey =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQ5ZDKWry4g9Ay0Dp\n"
    "gSljYFFNhPsctu+42oH9iQCN/Y2hRANCAAQr4XHd4MHXnvPgZ+X+mM8Mj7i08ThN\n"
    "QNsWrYVxBfLKY/A6e+BVDNbzUKXniX/RY0hBstlbhlSHRJspkY4kvw9p\n"
    "-----END PRIVATE KEY-----\n";

// An Ed25519 key encrypted with a passphrase: refused, never a prompt on the terminal.
constexpr std::string_view kEncryptedKey =
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\n"
    "MIGbMFcGCSqGSIb3DQEFDTBKMCkGCSqGSIb3DQEFDDAcBAiBYoxeqpjmtwICCAAw\n"
    "DAYIKoZIhvcNAgkFADAdBglghkgBZQMEASoEEKOYVnSrel3/rgjeeioOMK4EQNvn\n"
    "+aTpPPSzbEiGktkAxfXjx+0r2tRLTvAkvKLGf034hLMbjKtVibutkEOMuqpdqefN\n"
    "EEuYHboOQrzmtrisc2E=\n"
    "-----END ENCRYPTED PRIVATE KEY-----\n";

class KeyTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, std::string_view text, mode_t mode = 0600) {
    fs::path p = dir_.path() / name;
    write_file_atomic(p, text, mode).value();
    return p;
  }
  TempDir dir_ = TempDir::create(fs::temp_directory_path(), "kiln-key-").value();
};

}  // namespace

TEST_F(KeyTest, SignsAsRfc8032SaysAndNamesTheKeyBySha256OfItsPublicDer) {
  fs::path file = write("rfc.key", pem("PRIVATE KEY", unhex(cat(kPkcs8Prefix, kSecret))));
  SigningKey key = SigningKey::load(file).value();
  EXPECT_EQ(key.sign("").value(), unhex(kSignature));
  EXPECT_EQ(key.public_key().id(), sha256_hex(unhex(cat(kSpkiPrefix, kPublic))));
  PublicKey pub = PublicKey::from_pem(pem("PUBLIC KEY", unhex(cat(kSpkiPrefix, kPublic)))).value();
  EXPECT_EQ(pub.id(), key.public_key().id());
  EXPECT_TRUE(pub.verifies("", unhex(kSignature)));
  EXPECT_FALSE(pub.verifies("x", unhex(kSignature)));
  std::string flipped = unhex(kSignature);
  flipped[10] ^= 1;
  EXPECT_FALSE(pub.verifies("", flipped));
  EXPECT_FALSE(pub.verifies("", flipped.substr(0, 63)));
}

TEST_F(KeyTest, GeneratedKeysAreWrittenPrivatelyOnceAndReadBack) {
  SigningKey key = SigningKey::generate().value();
  fs::path file = dir_.path() / "signing.pem";
  key.write(file).value();
  struct stat st {};
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((file.string() + ".pub").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  SigningKey back = SigningKey::load(file).value();
  EXPECT_EQ(back.public_key().id(), key.public_key().id());
  PublicKey pub = PublicKey::load(file.string() + ".pub").value();
  EXPECT_EQ(pub.id(), key.public_key().id());
  EXPECT_TRUE(pub.verifies("m", back.sign("m").value()));
  EXPECT_EQ(SigningKey::generate().value().public_key().id() == key.public_key().id(), false);

  // A second key never replaces the first, and leaves no temporary behind.
  std::string before = read_file(file).value();
  auto again = SigningKey::generate().value().write(file);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("exists"), std::string::npos);
  EXPECT_EQ(read_file(file).value(), before);
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 2u);
}

TEST_F(KeyTest, RefusesKeysOthersCanReadAndKeysOfOtherKinds) {
  SigningKey key = SigningKey::generate().value();
  fs::path file = dir_.path() / "k.pem";
  key.write(file).value();
  ::chmod(file.c_str(), 0640);
  auto readable = SigningKey::load(file);
  ASSERT_FALSE(readable);
  EXPECT_NE(readable.error().message.find("chmod 600"), std::string::npos);
  EXPECT_NE(readable.error().message.find("0640"), std::string::npos);
  EXPECT_EQ(readable.error().message.find("BEGIN"), std::string::npos);  // never the contents

  auto ec = SigningKey::load(write("ec.pem", kEcKey));
  ASSERT_FALSE(ec);
  EXPECT_NE(ec.error().message.find("not an Ed25519 key"), std::string::npos);
  EXPECT_FALSE(PublicKey::from_pem(kEcKey));
  auto pub_as_private = SigningKey::load(write("pub.pem", key.public_key().pem()));
  ASSERT_FALSE(pub_as_private);
  EXPECT_NE(pub_as_private.error().message.find("PEM private key"), std::string::npos);
  EXPECT_FALSE(SigningKey::load(write("encrypted.pem", kEncryptedKey)));
  EXPECT_FALSE(SigningKey::load(dir_.path() / "missing.pem"));
  EXPECT_FALSE(SigningKey::load(dir_.path()));
  EXPECT_FALSE(PublicKey::from_pem(""));
  EXPECT_FALSE(PublicKey::from_pem(std::string(kMaxKeyFileBytes + 1, 'A')));
  EXPECT_FALSE(PublicKey::from_pem("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"));
}

}  // namespace kiln::attest
