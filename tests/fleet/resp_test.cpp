// The RESP reader on its own: bytes in, replies out, hostile headers refused.
#include "resp.hpp"

#include <gtest/gtest.h>

#include <string>

namespace hourglass::fleet::detail::testing {
namespace {

TEST(ReplyReader, RepliesSplitAcrossReadsComeOutWhole) {
  reply_reader r(1 << 20);
  const std::string bytes = "*2\r\n$5\r\nhello\r\n:42\r\n+OK\r\n";
  for (const char c : bytes) r.feed(&c, 1);
  const auto a = r.next();
  ASSERT_TRUE(a);
  ASSERT_TRUE(a->is_array());
  ASSERT_EQ(a->elements.size(), 2u);
  EXPECT_EQ(a->elements[0].str, "hello");
  EXPECT_EQ(a->elements[1].integer, 42);
  EXPECT_TRUE(r.next()->is_status("OK"));
  EXPECT_FALSE(r.next());
}

// Found by fuzz/resp_reply_fuzz: hiredis 0.14 allocated the element pointers
// of "*277777777" (2 GB) from the header alone.
TEST(ReplyReader, AnArrayLargerThanTheReplyLimitIsRefusedBeforeItIsAllocated) {
  reply_reader r(1 << 20);
  r.feed("*277777777\r\n", 12);
  EXPECT_THROW(r.next(), redis_unavailable);
  reply_reader fits(20);
  fits.feed("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n", 20);
  const auto a = fits.next();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->elements.size(), 4u) << "4 elements of 4 bytes fit a 20-byte limit";
  reply_reader tight(20);
  tight.feed("*6\r\n", 4);  // 6 elements need 24 bytes at least
  EXPECT_THROW(tight.next(), redis_unavailable);
}

TEST(ReplyReader, GarbageIsAProtocolError) {
  reply_reader r(1 << 20);
  r.feed("hello\r\n", 7);
  EXPECT_THROW(r.next(), redis_unavailable);
}

}  // namespace
}  // namespace hourglass::fleet::detail::testing
