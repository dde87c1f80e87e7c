// sha256 (OpenSSL EVP) and the encodings kiln writes: lowercase hex, urlsafe base64 without
// padding.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/expected.h"

namespace kiln {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  Sha256& update(const void* data, std::size_t size);
  Sha256& update(std::string_view data) { return update(data.data(), data.size()); }
  std::array<std::uint8_t, 32> digest();  // finishes the hash
  std::string hex_digest();               // finishes the hash

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string sha256_hex(std::string_view data);
Expected<std::string> sha256_file(const std::filesystem::path& path);
std::string base64_urlsafe_nopad(const std::uint8_t* data, std::size_t size);
bool is_sha256_hex(std::string_view text);  // 64 lowercase hex digits
// Standard base64 (RFC 4648, padded), and back: nullopt for text that is not exactly that (a
// character outside the alphabet, a length not a multiple of 4, padding in the middle).
std::string base64_encode(std::string_view data);
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace kiln
