#include "core/strings.h"

#include <gtest/gtest.h>

#include "core/terminal.h"

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
  // No empty '' pieces (glibc's wordexp splits ''\''' in two): an apostrophe alone is \'.
  EXPECT_EQ(shell_quote("'"), "\\'");
  EXPECT_EQ(shell_quote("'a b'"), "\\''a b'\\'");
  EXPECT_EQ(shell_quote("a=b"), "a=b");
  EXPECT_EQ(shell_quote("=cmd"), "'=cmd'");  // zsh would expand it to cmd's path
  EXPECT_EQ(shell_quote(""), "''");
}

// Every command kiln prints is made from its words: a URL may hold what RFC 3986 allows
// (;$&'()*+,=), and only the quoting keeps it one word (an index URL with ;touch${IFS}/tmp/x;echo
// passed kiln's URL check and ran when the printed line was pasted).
TEST(Strings, ShellCommandQuotesEveryWordAndRefusesWhatATerminalWouldChange) {
  EXPECT_EQ(shell_command({"uv", "pip", "install", "--index-url",
                           "http://h/;touch${IFS}/tmp/x;echo", "a==1.0+cu130"}),
            "uv pip install --index-url 'http://h/;touch${IFS}/tmp/x;echo' a==1.0+cu130");
  EXPECT_EQ(shell_command({"kiln", "--archs", "<the GPUs' archs>", "$(id)", "`id`", "a b", "*"}),
            "kiln --archs '<the GPUs'\\'' archs>' '$(id)' '`id`' 'a b' '*'");
  EXPECT_EQ(shell_command({}), "");
  for (const char* bad : {"a\nb", "\x1b[2J", "a\rb", "\xff", "a\u202eb", "\x7f"})
    EXPECT_FALSE(shell_command({"pip", bad})) << bad;
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
  EXPECT_EQ(control_character("a\xc2\x85"
                              "b"),
            "U+0085");
  EXPECT_EQ(control_character("a\xc2\x9f"
                              "b"),
            "U+009F");
  EXPECT_EQ(control_character("a\xc2\xa0"
                              "b"),
            "");  // NO-BREAK SPACE is not a control
  EXPECT_EQ(control_character("a\xe2\x80\xa8"
                              "b"),
            "U+2028");
  EXPECT_EQ(control_character("a\xe2\x80\xa9"
                              "b"),
            "U+2029");
  EXPECT_EQ(control_character("a\xe2\x80\xaa"
                              "b"),
            "");
  EXPECT_EQ(control_character("\r"), "\\x0d");
}

TEST(Strings, ParseByteSize) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("512K"), 512u << 10);
  EXPECT_EQ(parse_byte_size("64m"), 64u << 20);
  EXPECT_EQ(parse_byte_size("4G"), std::uint64_t(4) << 30);
  EXPECT_EQ(parse_byte_size("1T"), std::uint64_t(1) << 40);
  EXPECT_EQ(parse_byte_size("1.5t"), std::uint64_t(3) << 39);
  EXPECT_EQ(parse_byte_size("0.5K"), 512u);
  EXPECT_EQ(parse_byte_size("0.001K"), 1u);  // rounded down to whole bytes
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("18446744073709551615"), std::nullopt);  // 20 digits
  EXPECT_EQ(parse_byte_size("16777215.999999T"),
            (std::uint64_t(16777215) << 40) + (std::uint64_t(999999) << 40) / 1000000);
  for (const char* bad : {"",
                          "G",
                          "-1",
                          "+1",
                          "1.5",
                          "1.G",
                          ".5G",
                          "1..5G",
                          "1.5.5G",
                          "1.1234567G",
                          "4 G",
                          " 4G",
                          "4G ",
                          "4GB",
                          "4KiB",
                          "4X",
                          "0x10",
                          "99999999999999999999",
                          "17179869184G",
                          "16777216T",
                          "16777215.9999999T",
                          "1e9"})
    EXPECT_FALSE(parse_byte_size(bad)) << bad;
  EXPECT_FALSE(parse_byte_size(std::string(10000, '9') + "G"));
  EXPECT_FALSE(parse_byte_size(std::string("1\0G", 3)));
}

TEST(Strings, ParseDuration) {
  EXPECT_EQ(parse_duration("90s"), 90);
  EXPECT_EQ(parse_duration("30m"), 1800);
  EXPECT_EQ(parse_duration("12H"), 12 * 3600);
  EXPECT_EQ(parse_duration("30d"), 30 * 86400);
  EXPECT_EQ(parse_duration("2w"), 14 * 86400);
  EXPECT_EQ(parse_duration("0s"), 0);
  EXPECT_EQ(parse_duration("15250284452471w"), std::int64_t(15250284452471) * 604800);
  EXPECT_EQ(parse_duration("999999999999999999s"), 999999999999999999);
  for (const char* bad : {"", "s", "90", "-1d", "+1d", "1.5d", "1 d", "1d ", "1dd", "1y", "1ms",
                          "1000000000000000000s", "999999999999999999w", "15250284452472w"})
    EXPECT_FALSE(parse_duration(bad)) << bad;
  EXPECT_FALSE(parse_duration(std::string(10000, '1') + "d"));
  EXPECT_FALSE(parse_duration(std::string("1\0d", 3)));
}

}  // namespace kiln

namespace kiln {

TEST(Strings, AsciiClassesIgnoreTheLocale) {
  EXPECT_TRUE(is_ascii_digit('0') && is_ascii_digit('9') && !is_ascii_digit('a') &&
              !is_ascii_digit('\xb2'));
  EXPECT_TRUE(is_ascii_lower('a') && !is_ascii_lower('A') && !is_ascii_lower('\xe4'));
  EXPECT_TRUE(is_ascii_alpha('Z') && !is_ascii_alpha('_') && !is_ascii_alpha('\xc3'));
  EXPECT_TRUE(is_ascii_alnum('7') && is_ascii_alnum('q') && !is_ascii_alnum('-'));
  for (char c : std::string(" \t\n\v\f\r")) EXPECT_TRUE(is_ascii_space(c)) << int(c);
  for (char c : std::string("\x08\x0e\x1f\xa0x\0", 6)) EXPECT_FALSE(is_ascii_space(c)) << int(c);
}

TEST(Strings, ScannerConsumesForwardOnly) {
  Scanner s("  >=12.5rc1 ; x");
  EXPECT_EQ(s.skip_spaces(), "  ");
  EXPECT_TRUE(s.at(">="));
  EXPECT_FALSE(s.skip("=="));
  EXPECT_TRUE(s.skip(">="));
  std::size_t start = s.pos();
  EXPECT_EQ(s.take_while(is_ascii_digit), "12");
  EXPECT_EQ(s.peek(), '.');
  EXPECT_EQ(s.peek(1), '5');
  EXPECT_TRUE(s.skip('.'));
  EXPECT_EQ(s.take_while(is_ascii_digit), "5");
  EXPECT_EQ(s.since(start), "12.5");
  EXPECT_EQ(s.take_while(is_ascii_digit), "");  // nothing consumed
  EXPECT_TRUE(s.skip("rc"));
  EXPECT_EQ(s.rest(), "1 ; x");
  EXPECT_EQ(s.take_while([](char c) { return c != ';'; }), "1 ");
  EXPECT_FALSE(s.done());
  EXPECT_EQ(s.take_while([](char) { return true; }), "; x");
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.peek(), '\0');
  EXPECT_EQ(s.peek(5), '\0');
  EXPECT_FALSE(s.skip('x'));
  EXPECT_TRUE(s.skip(""));
  EXPECT_EQ(s.rest(), "");
  // A megabyte run in one call, no recursion.
  std::string mb(1 << 20, '7');
  Scanner big(mb);
  EXPECT_EQ(big.take_while(is_ascii_digit).size(), mb.size());
  EXPECT_TRUE(big.done());
}

TEST(Strings, TerminalTextShowsControlCharactersInsteadOfSendingThem) {
  EXPECT_EQ(terminal_text("plain, ünïcode — and\ttabs\nlines"),
            "plain, ünïcode — and\ttabs\nlines");  // nothing to change: the same bytes
  EXPECT_EQ(terminal_text("a\x1b[2K\rb\bc\x7f"), "a\\x1b[2K\\x0db\\x08c\\x7f");
  EXPECT_EQ(terminal_text("csi\xc2\x9b"
                          "31m nel\xc2\x85"),
            "csiU+009B31m nelU+0085");
  EXPECT_EQ(terminal_text("one\ntwo", /*keep_newlines=*/false), "one\\x0atwo");
  EXPECT_EQ(terminal_text(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(terminal_text("cut\xc2"), "cut\\xc2");  // a truncated sequence: its bytes shown
  EXPECT_EQ(terminal_text(""), "");
}

TEST(Strings, TerminalTextShowsTheControlsThatReorderText) {
  // "causal-conv1d" drawn from a name that is another (U+202E right-to-left override, U+2066
  // left-to-right isolate, U+2069 pop), and a line separator: each shown, never sent.
  EXPECT_EQ(terminal_text("evil\u202edl1vnoc-lasuac"), "evilU+202Edl1vnoc-lasuac");
  EXPECT_EQ(terminal_text("a\u2066b\u2069c\u200fd\u061ce\u2028f\u2029"),
            "aU+2066bU+2069cU+200FdU+061CeU+2028fU+2029");
  EXPECT_EQ(terminal_text("\u202a\u202b\u202c\u202d\u200e\u2067\u2068"),
            "U+202AU+202BU+202CU+202DU+200EU+2067U+2068");
  // Their neighbours stay: the zero-width joiner of emoji, Arabic and Hebrew letters, en dash.
  EXPECT_EQ(terminal_text("\u200d\u0627\u05d0\u2013\u2065\u206a"),
            "\u200d\u0627\u05d0\u2013\u2065\u206a");
}

TEST(Strings, TerminalFieldIsOneLineCutAtACharactersStart) {
  EXPECT_EQ(terminal_field("a\nb\x1b", 10), "a\\x0ab\\x1b");  // 10 bytes: kept whole
  EXPECT_EQ(terminal_field("abcdefgh", 5), "abcde…");
  // "é" is 2 bytes (0xc3 0xa9): a cut at byte 5 would split the third, so it goes at 4.
  EXPECT_EQ(terminal_field("éééé", 5), "éé…");
  EXPECT_EQ(terminal_field("éééé", 8), "éééé");
}

TEST(Strings, TerminalTextShowsBytesOfNoUtf8Character) {
  // The 8-bit CSI and other bytes 0x80-0xff outside a valid sequence: shown, never sent.
  EXPECT_EQ(terminal_text("a\x9b"
                          "31mb"),
            "a\\x9b31mb");
  EXPECT_EQ(terminal_text("\x80\xbf\xc0\xc1\xf5\xff"), "\\x80\\xbf\\xc0\\xc1\\xf5\\xff");
  // Overlong forms (of '/', of NUL, of CSI), surrogates, past U+10FFFF: each byte shown.
  EXPECT_EQ(terminal_text("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(terminal_text("\xe0\x80\x80"), "\\xe0\\x80\\x80");
  EXPECT_EQ(terminal_text("\xc1\x9b"), "\\xc1\\x9b");
  EXPECT_EQ(terminal_text("\xf0\x80\x80\xaf"), "\\xf0\\x80\\x80\\xaf");
  EXPECT_EQ(terminal_text("\xed\xa0\x80|\xed\xbf\xbf"), "\\xed\\xa0\\x80|\\xed\\xbf\\xbf");
  EXPECT_EQ(terminal_text("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  // Truncated sequences, in the middle and at the end; a lead byte followed by ASCII.
  EXPECT_EQ(terminal_text("\xe2\x82x\xf0\x9f\x98"), "\\xe2\\x82x\\xf0\\x9f\\x98");
  EXPECT_EQ(terminal_text("\xc3("), "\\xc3(");
  // Valid characters of every length stay as they are, next to what is shown.
  EXPECT_EQ(terminal_text("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd\xf4\x8f\xbf\xbf"),
            "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xef\xbf\xbd\xf4\x8f\xbf\xbf");
  EXPECT_EQ(terminal_text("\xc3\xa9\xff\xe2\x82\xac"), "\xc3\xa9\\xff\xe2\x82\xac");
  // Whatever the input, the output is valid UTF-8 without a control character but \n and \t.
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string shown = terminal_text(all + all.substr(0x80) + "\xe2\x80", false);
  EXPECT_TRUE(is_valid_utf8(shown));
  EXPECT_EQ(shown.find('\n'), std::string::npos);
  std::erase(shown, '\t');  // kept
  EXPECT_EQ(control_character(shown), "");
}

}  // namespace kiln
