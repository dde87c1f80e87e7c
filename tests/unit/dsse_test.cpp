#include "attest/dsse.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/hash.h"
#include "core/strings.h"

namespace kiln::attest {

namespace {

std::string line_of(const std::string& payload, const std::string& sig, const std::string& keyid) {
  nlohmann::json j = {{"payload", payload},
                      {"payloadType", kInTotoPayloadType},
                      {"signatures", {{{"keyid", keyid}, {"sig", sig}}}}};
  return j.dump() + "\n";
}

}  // namespace

// The DSSE specification's own example.
TEST(Dsse, PreAuthenticationEncodingAsTheSpecificationWritesIt) {
  EXPECT_EQ(pae("http://example.com/HelloWorld", "hello world"),
            "DSSEv1 29 http://example.com/HelloWorld 11 hello world");
  EXPECT_EQ(pae("", ""), "DSSEv1 0  0 ");
}

TEST(Dsse, SignedEnvelopesReadBackAndVerifyOnlyWithTheirKeyAndBytes) {
  SigningKey key = SigningKey::generate().value();
  SigningKey other = SigningKey::generate().value();
  Envelope e = sign_envelope("{\"a\":1}", kInTotoPayloadType, key).value();
  std::string line = envelope_line(e);
  EXPECT_EQ(line.find('\n'), line.size() - 1);  // one line
  std::vector<Envelope> back = parse_envelopes(line).value();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].payload, "{\"a\":1}");
  EXPECT_EQ(back[0].signatures.at(0).keyid, key.public_key().id());
  EXPECT_TRUE(signed_by(back[0], key.public_key()));
  EXPECT_FALSE(signed_by(back[0], other.public_key()));
  // Ed25519 is deterministic: the same payload, the same line.
  EXPECT_EQ(envelope_line(sign_envelope("{\"a\":1}", kInTotoPayloadType, key).value()), line);

  Envelope changed = back[0];
  changed.payload = "{\"a\":2}";
  EXPECT_FALSE(signed_by(changed, key.public_key()));
  changed = back[0];
  changed.payload_type = "application/json";  // the type is signed too
  EXPECT_FALSE(signed_by(changed, key.public_key()));
  changed = back[0];
  changed.signatures[0].keyid = other.public_key().id();  // a named key is the only one tried
  EXPECT_FALSE(signed_by(changed, key.public_key()));
  changed.signatures[0].keyid = "";  // a signature that names no key is tried with any
  EXPECT_TRUE(signed_by(changed, key.public_key()));
}

TEST(Dsse, ReadsUrlSafeUnpaddedBase64AndSeveralLines) {
  const std::string kOdd("\xfb\xff\xbf\xfe", 4);  // base64 with '+' and '/', and padding
  SigningKey key = SigningKey::generate().value();
  Envelope e = sign_envelope(kOdd, kInTotoPayloadType, key).value();
  std::string payload = base64_encode(e.payload), sig = base64_encode(e.signatures[0].sig);
  for (std::string* s : {&payload, &sig}) {
    for (char& c : *s) c = c == '+' ? '-' : c == '/' ? '_' : c;
    while (!s->empty() && s->back() == '=') s->pop_back();
  }
  std::string text = "\n" + line_of(payload, sig, key.public_key().id()) + "\n" + envelope_line(e);
  std::vector<Envelope> back = parse_envelopes(text).value();
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].payload, kOdd);
  EXPECT_TRUE(signed_by(back[0], key.public_key()));
}

TEST(Dsse, RefusesWhatIsNotAnEnvelopeNamingTheLine) {
  auto refused = [](const std::string& text, const std::string& says) {
    auto r = parse_envelopes(text);
    ASSERT_FALSE(r) << text.substr(0, 80);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused("", "no envelope");
  refused("\n  \n", "no envelope");
  refused("{}\n", "line 1: no \"payload\"");
  refused("\n[1]", "line 2: not a JSON object");
  refused("{\"payload\":\"e30=\",\"payloadType\":1,\"signatures\":[]}", "\"payloadType\"");
  refused("{\"payload\":\"e3!0\",\"payloadType\":\"t\",\"signatures\":[{\"sig\":\"\"}]}",
          "not base64");
  refused("{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":[]}", "1 to 16");
  refused("{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":{}}", "1 to 16");
  refused("{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":[1]}", "not an object");
  refused(
      "{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":[{\"keyid\":2,\"sig\":\"\"}]}",
      "\"keyid\"");
  std::string many_sigs = "[";
  for (int i = 0; i < 17; ++i) many_sigs += std::string(i ? "," : "") + "{\"sig\":\"\"}";
  refused(cat("{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":", many_sigs, "]}"),
          "1 to 16");
  std::string one =
      "{\"payload\":\"e30=\",\"payloadType\":\"t\",\"signatures\":[{\"sig\":\"\"}]}\n";
  std::string many;
  for (int i = 0; i < 17; ++i) many += one;
  refused(many, "more than 16");
  refused(std::string(kMaxAttestationBytes + 1, ' '), "at most");
  refused(std::string(100, '[') + "\n", "line 1");
}

}  // namespace kiln::attest
