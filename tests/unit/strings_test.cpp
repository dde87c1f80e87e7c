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

TEST(Strings, ControlCharacterFindsEveryLineBreakOfSplitlines) {
  EXPECT_EQ(control_character("pkg/a.py"), "");
  EXPECT_EQ(control_character("caf\xc3\xa9 \xe2\x82\xac"), "");  // other non-ASCII is fine
  for (const char* s : {"\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\t", "\x7f", "\x01"})
    EXPECT_EQ(control_character(cat("a", s, "b")).substr(0, 2), "\\x") << static_cast<int>(s[0]);
  EXPECT_EQ(control_character("a\xc2\x85" "b"), "U+0085");
  EXPECT_EQ(control_character("a\xc2\x9f" "b"), "U+009F");
  EXPECT_EQ(control_character("a\xc2\xa0" "b"), "");  // NO-BREAK SPACE is not a control
  EXPECT_EQ(control_character("a\xe2\x80\xa8" "b"), "U+2028");
  EXPECT_EQ(control_character("a\xe2\x80\xa9" "b"), "U+2029");
  EXPECT_EQ(control_character("a\xe2\x80\xaa" "b"), "");
  EXPECT_EQ(control_character("\r"), "\\x0d");
}

TEST(Strings, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("512K"), 512u << 10);
  EXPECT_EQ(parse_byte_size("64m"), 64u << 20);
  EXPECT_EQ(parse_byte_size("4G"), std::uint64_t(4) << 30);
  EXPECT_EQ(parse_byte_size("1T"), std::uint64_t(1) << 40);
  for (const char* bad : {"", "G", "-1", "1.5G", "4 G", "4GB", "99999999999999999999", "17179869184G"})
    EXPECT_FALSE(parse_byte_size(bad)) << bad;
}

}  // namespace kiln
