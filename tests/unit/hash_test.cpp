#include "core/hash.h"

#include <gtest/gtest.h>

namespace kiln {

TEST(Hash, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Hash, Base64UrlsafeNoPadding) {
  auto b = [](std::string_view s) {
    return base64_urlsafe_nopad(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(b(""), "");
  EXPECT_EQ(b("f"), "Zg");
  EXPECT_EQ(b("fo"), "Zm8");
  EXPECT_EQ(b("foo"), "Zm9v");
  EXPECT_EQ(b("\xfb\xff"), "-_8");
  // RECORD form of sha256("") as pip writes it.
  auto d = Sha256().update("").digest();
  EXPECT_EQ(base64_urlsafe_nopad(d.data(), d.size()),
            "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU");
}

TEST(Hash, Base64RoundTripsAndRefusesWhatIsNotBase64) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode(std::string("\xff\xfe\x00", 3)), "//4A");
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (std::size_t n = 0; n <= all.size(); n += 37)
    EXPECT_EQ(base64_decode(base64_encode(all.substr(0, n))), all.substr(0, n)) << n;
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode(""), "");
  for (const char* bad :
       {"Zg=", "Zg", "Z===", "Zg=a", "Zm9v\n", "Zm-v", "Zm_v", "=Zm9", "Zm9v===="})
    EXPECT_FALSE(base64_decode(bad)) << bad;
}

TEST(Hash, IsSha256Hex) {
  EXPECT_TRUE(is_sha256_hex(std::string(64, 'a')));
  EXPECT_FALSE(is_sha256_hex(std::string(64, 'A')));
  EXPECT_FALSE(is_sha256_hex(std::string(63, 'a')));
  EXPECT_FALSE(is_sha256_hex(std::string(63, 'a') + "g"));
}

}  // namespace kiln
