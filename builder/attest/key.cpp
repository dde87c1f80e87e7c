#include "attest/key.h"

#include <fcntl.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/fs.h"
#include "core/hash.h"
#include "core/strings.h"
#include "core/terminal.h"

namespace kiln::attest {

namespace fs = std::filesystem;

namespace {

std::shared_ptr<evp_pkey_st> own(EVP_PKEY* key) {
  return std::shared_ptr<evp_pkey_st>(key, EVP_PKEY_free);
}

std::string quoted(const fs::path& file) {
  return terminal_field(file.string(), 300);
}

// What a memory BIO holds after `write` wrote into it ("" when writing failed).
template <typename Write>
std::string bio_text(Write write) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || write(bio.get()) != 1) return "";
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string out(data, n > 0 ? static_cast<std::size_t>(n) : 0);
  OPENSSL_cleanse(data, n > 0 ? static_cast<std::size_t>(n) : 0);
  return out;
}

// A PEM key read by `read` from `pem`; never a passphrase prompt (an encrypted key is refused).
template <typename Read>
EVP_PKEY* read_pem(std::string_view pem, Read read) {
  if (pem.size() > kMaxKeyFileBytes) return nullptr;
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(
      BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  if (!bio) return nullptr;
  auto no_passphrase = [](char*, int, int, void*) -> int { return -1; };
  return read(bio.get(), nullptr, +no_passphrase, nullptr);
}

bool is_ed25519(EVP_PKEY* key) {
  return key && EVP_PKEY_id(key) == EVP_PKEY_ED25519;
}

// `data` as the new file `file` with `mode`: written to a temporary beside it, fsynced, then linked
// into place, so a file that exists is never replaced and none appears half-written.
Expected<void> write_new_file(const fs::path& file, std::string_view data, mode_t mode) {
  fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  std::string temp = (dir / cat(".", file.filename().string(), ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(temp.data());
  if (fd < 0)
    return Error::bad_input(cat("cannot write ", quoted(file), ": ", std::strerror(errno)));
  UniqueFd owned(fd);
  bool ok = ::fchmod(fd, mode) == 0;
  for (std::size_t done = 0; ok && done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  if (ok && ::link(temp.c_str(), file.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  ::unlink(temp.c_str());
  if (!ok)
    return Error::bad_input(
        cat("cannot write ", quoted(file), ": ",
            err == EEXIST ? "it exists (kiln never replaces a key file)" : std::strerror(err)));
  return fsync_directory(dir);
}

}  // namespace

PublicKey::PublicKey(std::shared_ptr<evp_pkey_st> key) : key_(std::move(key)) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(key_.get(), &der);
  if (n > 0) id_ = sha256_hex(std::string_view(reinterpret_cast<const char*>(der), n));
  OPENSSL_free(der);
}

Expected<PublicKey> PublicKey::from_pem(std::string_view pem) {
  EVP_PKEY* key = read_pem(pem, PEM_read_bio_PUBKEY);
  if (!key) return Error::bad_input("not a PEM public key (-----BEGIN PUBLIC KEY-----)");
  auto owned = own(key);
  if (!is_ed25519(key)) return Error::bad_input("not an Ed25519 key (kiln signs with Ed25519)");
  PublicKey out(std::move(owned));
  if (out.id_.empty()) return Error::bad_input("a public key OpenSSL cannot encode");
  return out;
}

Expected<PublicKey> PublicKey::load(const fs::path& file) {
  auto text = read_file(file, kMaxKeyFileBytes);
  if (!text) return Error::bad_input(cat("public key ", quoted(file), ": ", text.error().message));
  auto key = from_pem(*text);
  if (!key) return Error::bad_input(cat("public key ", quoted(file), ": ", key.error().message));
  return key;
}

std::string PublicKey::pem() const {
  return bio_text([&](BIO* bio) { return PEM_write_bio_PUBKEY(bio, key_.get()); });
}

bool PublicKey::verifies(std::string_view message, std::string_view signature) const {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || signature.size() != 64) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(), reinterpret_cast<const unsigned char*>(message.data()),
                          message.size()) == 1;
}

SigningKey::SigningKey(std::shared_ptr<evp_pkey_st> key) : key_(key), public_(std::move(key)) {}

Expected<SigningKey> SigningKey::generate() {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), EVP_PKEY_CTX_free);
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) != 1 || EVP_PKEY_keygen(ctx.get(), &key) != 1)
    return Error::failed("OpenSSL could not generate an Ed25519 key");
  return SigningKey(own(key));
}

Expected<SigningKey> SigningKey::load(const fs::path& file) {
  auto fail = [&](const std::string& why) {
    return Error::bad_input(cat("signing key ", quoted(file), ": ", why));
  };
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail("not a regular file");
  if (st.st_uid != ::geteuid())
    return fail(cat("owned by uid ", st.st_uid, ", not by this user (uid ", ::geteuid(), ")"));
  if (st.st_mode & 077)
    return fail(cat("others may read or write it (mode ", std::string(1, '0'),
                    (st.st_mode >> 6) & 7, (st.st_mode >> 3) & 7, st.st_mode & 7,
                    "); chmod 600 it"));
  if (st.st_size > static_cast<off_t>(kMaxKeyFileBytes)) return fail("too large for a key");
  std::string pem(static_cast<std::size_t>(st.st_size), '\0');
  ssize_t n = ::pread(fd.get(), pem.data(), pem.size(), 0);
  if (n != static_cast<ssize_t>(pem.size())) return fail("cannot be read whole");
  EVP_PKEY* key = read_pem(pem, PEM_read_bio_PrivateKey);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!key) return fail("not an unencrypted PEM private key (-----BEGIN PRIVATE KEY-----)");
  auto owned = own(key);
  if (!is_ed25519(key)) return fail("not an Ed25519 key (kiln signs with Ed25519)");
  return SigningKey(std::move(owned));
}

Expected<std::string> SigningKey::sign(std::string_view message) const {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  std::string sig(64, '\0');
  std::size_t size = sig.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key_.get()) != 1 ||
      EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &size,
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1)
    return Error::failed("OpenSSL could not sign with the Ed25519 key");
  sig.resize(size);
  return sig;
}

Expected<void> SigningKey::write(const fs::path& file) const {
  std::string pem = bio_text([&](BIO* bio) {
    return PEM_write_bio_PrivateKey(bio, key_.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (pem.empty()) return Error::failed("OpenSSL could not encode the private key");
  auto written = write_new_file(file, pem, 0600);
  OPENSSL_cleanse(pem.data(), pem.size());
  KILN_CHECK(written);
  return write_new_file(fs::path(file.string() + ".pub"), public_.pem(), 0644);
}

}  // namespace kiln::attest
