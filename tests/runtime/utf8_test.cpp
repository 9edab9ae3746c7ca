#include "hourglass/utf8.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hourglass {
namespace {

TEST(Utf8, AcceptsWellFormed) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("plain ascii"));
  EXPECT_TRUE(valid_utf8("\xC3\xA9"));          // é
  EXPECT_TRUE(valid_utf8("\xE2\x82\xAC"));      // €
  EXPECT_TRUE(valid_utf8("\xF0\x9F\x98\x80"));  // U+1F600
  EXPECT_TRUE(valid_utf8("\xF4\x8F\xBF\xBF"));  // U+10FFFF
  EXPECT_EQ(utf8_sequence_length("a\xE2\x82\xAC", 1), 3u);
}

TEST(Utf8, RejectsMalformed) {
  for (const char* bad : {"\x80", "\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80",
                          "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF", "\xC3", "\xE2\x82", "a\xC3(b"}) {
    EXPECT_FALSE(valid_utf8(bad)) << testing::PrintToString(std::string(bad));
  }
  EXPECT_EQ(utf8_sequence_length("\xE2\x82", 0), 0u);
}

}  // namespace
}  // namespace hourglass
