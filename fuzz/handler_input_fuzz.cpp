// The JSON bodies of the built-in handlers sleep, spin, stream and call, on a
// context already past its deadline so nothing waits. Property: a body is
// either refused with a handler_error (400 invalid_argument) or accepted, and
// then the job stops at once with a stopped_error; nothing else escapes.
// `call` knows two upstreams, "a" and "b", that are never reached: an
// accepted call has no budget left, so it stops before any connect.
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/context.hpp"
#include "hourglass/server/builtin_handlers.hpp"
#include "hourglass/server/upstream_client.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Never run: the client only needs it to exist.
  static boost::asio::io_context io;
  static hourglass::server::upstream_client upstreams(
      io, std::map<std::string, std::string>{{"a", "http://127.0.0.1:9"}, {"b", "http://127.0.0.1:9/b"}});
  static const hourglass::server::handler_fn handlers[] = {hourglass::server::sleep_handler(),
                                                           hourglass::server::spin_handler(),
                                                           hourglass::server::call_handler(upstreams)};
  hourglass::manual_clock clk;
  const hourglass::context_source expired = hourglass::context_source::with_timeout(clk, hourglass::duration::zero());
  hourglass::server::request_view req;
  req.body = std::string_view(reinterpret_cast<const char*>(data), size);
  req.content_type = "application/json";
  // The stream handler writes into a stream that, as the daemon's do, checks
  // the context first.
  struct checked_output final : hourglass::server::output_stream {
    const hourglass::context& ctx;
    explicit checked_output(const hourglass::context& c) : ctx(c) {}
    void write(std::string_view) override { ctx.check(); }
  } out(expired.get());
  static const hourglass::server::stream_handler_fn stream = hourglass::server::stream_handler();
  try {
    stream(expired.get(), req, out);
    FUZZ_CHECK(false && "an expired context must stop the stream");
  } catch (const hourglass::server::handler_error& e) {
    FUZZ_CHECK(e.http_status() == 400);
    FUZZ_CHECK(e.code() == "invalid_argument");
  } catch (const hourglass::stopped_error&) {
  }
  for (const auto& handler : handlers) {
    try {
      (void)handler(expired.get(), req);
      FUZZ_CHECK(false && "an expired context must stop the job");
    } catch (const hourglass::server::handler_error& e) {
      FUZZ_CHECK(e.http_status() == 400);
      FUZZ_CHECK(e.code() == "invalid_argument");
    } catch (const hourglass::stopped_error&) {
    }
  }
  return 0;
}
