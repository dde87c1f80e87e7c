#include "core/strings.h"

#include <gtest/gtest.h>

namespace kiln {

TEST(Strings, SplitSkipsEmptyByDefault) {
  EXPECT_EQ(split("a;;b; c", "; "), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(split("a;;b", ";", false), (std::vector<std::string>{"a", "", "b"}));
}

TEST(Strings, TrimJoinLower) {
  EXPECT_EQ(trim("  x y \n"), "x y");
  EXPECT_EQ(join({"a", "b"}, ", "), "a, b");
  EXPECT_EQ(lower("AbC"), "abc");
}

TEST(Strings, ClosestMatchFindsTyposOnly) {
  EXPECT_EQ(closest_match("sha265", {"sha256", "url", "pypi"}), "sha256");
  EXPECT_EQ(closest_match("verison", {"name", "version"}), "version");
  EXPECT_EQ(closest_match("completely-different", {"name", "version"}), "");
}

TEST(Strings, ShellQuote) {
  EXPECT_EQ(shell_quote("plain-arg"), "plain-arg");
  EXPECT_EQ(shell_quote("has space"), "'has space'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

}  // namespace kiln

namespace kiln {

TEST(Strings, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain"));
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_FALSE(is_valid_utf8("\xe2\x82"));          // truncated
}

TEST(Strings, PrintableExcerpt) {
  EXPECT_EQ(printable_excerpt("a\tb\x7f"), "a?b?");
  EXPECT_EQ(printable_excerpt(std::string(70, 'x')), std::string(60, 'x') + "...");
}

}  // namespace kiln
