// core/json: the one JSON parser, with a bound on nesting (a report of arrays 100,000 deep once
// crashed `kiln doctor` with a stack overflow, in nlohmann's recursive copy and dump).
#include "core/json.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {

TEST(Json, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_depth("1"), 0u);
  EXPECT_EQ(json_depth(R"({"a": [1, {"b": []}]})"), 4u);
  EXPECT_EQ(json_depth(R"({"a": "[[[[{{{{", "b": "\"[[["})"), 1u);
  EXPECT_EQ(json_depth(R"(["\\", [[]]])"), 3u);  // an escaped backslash ends before the quote
  EXPECT_EQ(json_depth("]]]][[]"), 2u);          // stray closers do not go below zero
}

TEST(Json, ParsesWhatIsShallowAndRefusesWhatNestsTooDeep) {
  EXPECT_EQ(parse_json(R"({"a": [1, 2]})")["a"][1], 2);
  EXPECT_TRUE(parse_json("{").is_discarded());
  EXPECT_TRUE(parse_json("").is_discarded());
  std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_FALSE(parse_json(ok).is_discarded());
  std::string deep = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_TRUE(parse_json(deep).is_discarded());
  std::string huge =
      "{\"doctor_version\": 1, \"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_TRUE(parse_json(huge).is_discarded());
  EXPECT_EQ(json_depth(huge), kMaxJsonDepth + 1);  // counting stops past the limit
  // Brackets in strings are text, however many.
  std::string text = "{\"s\": \"" + std::string(100000, '[') + "\"}";
  EXPECT_EQ(parse_json(text)["s"].get<std::string>().size(), 100000u);
}

}  // namespace kiln
