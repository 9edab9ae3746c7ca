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

// The most an async job's collected output may hold: it is kept in memory
// (or in the broker) as the job's result.
inline constexpr std::size_t max_collected_output = 16 << 20;

// The same rules as a channel that never fills: a stopped context throws,
// each write is progress; past max_collected_output the job fails.
class collected_output final : public output_stream {
 public:
  explicit collected_output(const context& ctx) : ctx_(ctx) {}
  void write(std::string_view chunk) override {
    ctx_.check();
    if (chunk.empty()) return;
    if (chunk.size() > max_collected_output - body.size()) {
      throw handler_error(500, "output_too_large", "a streamed result may hold at most 16 MiB");
    }
    body.append(chunk);
    ctx_.progress();
  }
  std::string body;

 private:
  const context& ctx_;
};

}  // namespace hourglass::server::detail
