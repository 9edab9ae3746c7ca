// The two places a streaming handler's output_stream writes to: a
// connection's output_channel (sync jobs: the bytes go out as they come) and
// a string (async jobs: the output becomes the job's result); and the bound
// on any result a store keeps. Internal to the server.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "hourglass/context.hpp"
#include "hourglass/output_channel.hpp"
#include "hourglass/server/handler.hpp"

namespace hourglass::server::detail {

class channel_output final : public output_stream {
 public:
  channel_output(const context& ctx, output_channel& channel) : ctx_(ctx), channel_(channel) {}
  void write(std::string_view chunk) override { channel_.write(ctx_, chunk); }

 private:
  const context& ctx_;
  output_channel& channel_;
};

// An async job's result is kept (in memory, or in the broker) for others
// to read: at most --max-result bytes of it. A larger one ends the job
// error/result_too_large, never retried (the same work makes the same
// result): thrown from the job's run, so the outcome is that error.
void check_stored_result(const handler_result& r, std::size_t max_result);
[[noreturn]] void throw_result_too_large(std::size_t max_result);

// The same rules as a channel that never fills: a stopped context throws,
// each write is progress; past `max_result` the job fails at once
// (check_stored_result's error), before the output is held.
class collected_output final : public output_stream {
 public:
  collected_output(const context& ctx, std::size_t max_result) : ctx_(ctx), max_(max_result) {}
  void write(std::string_view chunk) override {
    ctx_.check();
    if (chunk.empty()) return;
    if (chunk.size() > max_ - std::min(max_, body.size())) throw_result_too_large(max_);
    body.append(chunk);
    ctx_.progress();
  }
  std::string body;

 private:
  const context& ctx_;
  std::size_t max_;
};

}  // namespace hourglass::server::detail
