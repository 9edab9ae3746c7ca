// The two places a streaming handler's output_stream writes to: a
// connection's output_channel (sync jobs: the bytes go out as they come) and
// a string (async jobs: the output becomes the job's result). Internal to
// the server.
#pragma once

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

// The same rules as a channel that never fills: a stopped context throws,
// each write is progress.
class collected_output final : public output_stream {
 public:
  explicit collected_output(const context& ctx) : ctx_(ctx) {}
  void write(std::string_view chunk) override {
    ctx_.check();
    body.append(chunk);
    ctx_.progress();
  }
  std::string body;

 private:
  const context& ctx_;
};

}  // namespace hourglass::server::detail
