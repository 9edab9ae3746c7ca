// The response bytes the daemon writes itself (append_head plus the body)
// are exactly the bytes Beast's serializer writes for the same message.
#include "http/responses.hpp"

#include <gtest/gtest.h>

#include <boost/beast/http/write.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

namespace hourglass::server::detail {
namespace {

namespace http = boost::beast::http;

std::string by_beast(const response& res) {
  std::ostringstream os;
  os << res;
  return os.str();
}

std::string by_us(const response& res) {
  std::string out = "left alone:";
  append_head(out, res);
  return out.substr(11) + res.body();
}

TEST(Responses, OurBytesAreBeastsForEveryShapeTheDaemonSends) {
  std::vector<response> shapes;
  shapes.push_back(make_response(200, "hello", "text/plain"));
  shapes.push_back(error_response(503, "queue_full", "the queue is full"));
  shapes.back().set(http::field::retry_after, "1");
  shapes.push_back(invalid_budget_response("bad \"grpc-timeout\""));
  job_timings t;
  t.queue_delay = std::chrono::microseconds(12);
  t.run_time = std::chrono::microseconds(1250);
  handler_result echoed{"hi", "text/plain"};
  shapes.push_back(
      job_response(status::ok(), t, std::chrono::seconds(1), std::chrono::milliseconds(998), &echoed, nullptr));
  shapes.push_back(job_response(status::expired(expiry_stage::queue), t, std::chrono::seconds(1),
                                std::chrono::seconds(0), nullptr, nullptr));
  response empty = make_response(204, "", "text/plain");
  shapes.push_back(empty);
  response head = make_response(200, "", "text/plain");  // a HEAD answer: the length of a body not sent
  head.content_length(5);
  shapes.push_back(head);
  response closing = make_response(200, "bye", "text/plain");
  closing.keep_alive(false);
  shapes.push_back(closing);
  response old = make_response(200, "for 1.0", "text/plain");
  old.version(10);
  shapes.push_back(old);
  response custom = make_response(299, "odd", "text/plain");  // a handler's own 2xx, with no standard reason
  shapes.push_back(custom);
  response binary = make_response(200, std::string("\0\r\n\xff", 4), "application/octet-stream");
  shapes.push_back(binary);

  for (const response& res : shapes) {
    EXPECT_EQ(by_us(res), by_beast(res));
  }
}

TEST(Responses, TheHeadEndsAtTheBlankLine) {
  std::string head;
  append_head(head, make_response(200, "body", "text/plain"));
  EXPECT_EQ(head.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << head;
  EXPECT_EQ(head.find("body"), std::string::npos);
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
}

TEST(Responses, ServerTimingIsMillisecondsToTheMicrosecond) {
  job_timings t;
  t.queue_delay = std::chrono::nanoseconds(12'400);
  t.run_time = std::chrono::nanoseconds(1'250'600);
  EXPECT_EQ(server_timing(t), "queue;dur=0.012, run;dur=1.251");
  EXPECT_EQ(server_timing({}), "queue;dur=0.000, run;dur=0.000");
  job_timings longest;  // the widest text: it fits the buffer whole
  longest.queue_delay = longest.run_time = duration::max();
  server_timing_buffer buf;
  EXPECT_EQ(server_timing(longest, buf), "queue;dur=9223372036854.775, run;dur=9223372036854.775");
  EXPECT_EQ(server_timing(longest), "queue;dur=9223372036854.775, run;dur=9223372036854.775");
}

TEST(DescribeError, WhichFailuresAnotherAttemptMayMend) {
  const auto of = [](auto e) { return describe_error(std::make_exception_ptr(e)); };
  EXPECT_TRUE(of(handler_error(503, "upstream_down", "x")).retryable) << "a 5xx: a dependency failed";
  EXPECT_FALSE(of(handler_error::bad_input("x")).retryable) << "the same input fails the same way";
  EXPECT_FALSE(of(handler_error(404, "no_such_user", "x")).retryable);
  const error_info permanent = of(handler_error::permanent(502, "account_closed", "closed"));
  EXPECT_FALSE(permanent.retryable);
  EXPECT_EQ(permanent.http_status, 502u);
  EXPECT_EQ(permanent.code, "account_closed");
  EXPECT_TRUE(of(std::runtime_error("bug")).retryable) << "anything else: a 500";
}

}  // namespace
}  // namespace hourglass::server::detail
