// A job's request without HTTP (job_input.hpp): what its handler reads.
#include "core/job_input.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace hourglass::server::detail {
namespace job_input_testing {

TEST(JobInput, TheJobsOwnHeadersWinAndFramingIsNotShown) {
  handler_entry e;
  e.name = "resize";
  // What a bulk request's headers say: every job of it shares them.
  const std::map<std::string, std::string, std::less<>> shared = {{"authorization", "Bearer t"},
                                                                  {"content-type", "application/json"},
                                                                  {"content-length", "512"},
                                                                  {"idempotency-key", "bulk-1"}};
  job_input in;
  in.entry = &e;
  in.body = "hello";
  in.content_type = "text/plain";
  in.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  in.other_header = [&](std::string_view name) -> std::string_view {
    const auto it = shared.find(name);
    return it == shared.end() ? std::string_view() : std::string_view(it->second);
  };
  EXPECT_EQ(in.header("Content-Type"), "text/plain") << "the item's, not the bulk request's";
  EXPECT_EQ(in.header("idempotency-key"), "") << "none of its own: not the bulk request's";
  EXPECT_EQ(in.header("Content-Length"), "") << "the body is whole: no framing";
  EXPECT_EQ(in.header("TRACEPARENT"), in.traceparent);
  EXPECT_EQ(in.header("authorization"), "Bearer t");
  EXPECT_EQ(in.header("x-absent"), "");
  in.idempotency_key = "item-7";
  const request_view v = in.view();
  EXPECT_EQ(v.idempotency_key, "item-7");
  EXPECT_EQ(v.header("Idempotency-Key"), "item-7");
  EXPECT_EQ(v.body, "hello");
  EXPECT_EQ(v.handler, "resize");

  job_input child;  // made by a handler: no request behind it
  child.entry = &e;
  EXPECT_EQ(child.view().header("authorization"), "");
}

}  // namespace job_input_testing
}  // namespace hourglass::server::detail
