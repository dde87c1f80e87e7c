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
