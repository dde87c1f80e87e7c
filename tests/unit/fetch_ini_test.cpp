#include "fetch/ini.h"

#include <gtest/gtest.h>

namespace kiln::fetch {

TEST(FetchIni, SectionsKeysCommentsAndContinuations) {
  auto entries = parse_ini(
                     "# comment\n"
                     "; another\n"
                     "[global]\n"
                     "index-url = https://a.example/simple\n"
                     "timeout: 60\n"
                     "trusted-host =\n"
                     "    a.example\n"
                     "    b.example\n"
                     "\n"
                     "[submodule \"deps/x\"]\r\n"
                     "\tpath = deps/x\r\n"
                     "\turl = ../x.git  \n",
                     "pip.conf")
                     .value();
  ASSERT_EQ(entries.size(), 5u);
  EXPECT_EQ(entries[0].section, "global");
  EXPECT_EQ(entries[0].key, "index-url");
  EXPECT_EQ(entries[0].value, "https://a.example/simple");
  EXPECT_EQ(entries[0].line, 4);
  EXPECT_EQ(entries[1].key, "timeout");
  EXPECT_EQ(entries[1].value, "60");
  EXPECT_EQ(entries[2].value, "a.example\nb.example");
  EXPECT_EQ(entries[3].section, "submodule \"deps/x\"");
  EXPECT_EQ(entries[3].value, "deps/x");
  EXPECT_EQ(entries[4].key, "url");
  EXPECT_EQ(entries[4].value, "../x.git");
}

TEST(FetchIni, ErrorsNameFileAndLine) {
  auto no_section = parse_ini("index-url = x\n", "a.conf");
  ASSERT_FALSE(no_section);
  EXPECT_EQ(no_section.error().message, "a.conf:1: 'key = value' before any '[section]'");
  EXPECT_EQ(no_section.error().kind, ErrorKind::BadInput);
  auto junk = parse_ini("[global]\njust words\n", "b.conf");
  ASSERT_FALSE(junk);
  EXPECT_EQ(junk.error().message, "b.conf:2: expected '[section]' or 'key = value'");
  EXPECT_FALSE(parse_ini("[global\n", "c.conf"));
  EXPECT_FALSE(parse_ini("[a] x\n", "c.conf"));
}

}  // namespace kiln::fetch
