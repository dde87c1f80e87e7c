// Assertions the unit tests share beyond GoogleTest's own.
#pragma once

#include <gtest/gtest.h>

#include <string>

// That `needle` occurs in `haystack`, printing the haystack when it does not.
#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
