// Streaming responses (docs/reference/http-api.md, "Trailers"): bytes go out as
// the handler writes them, in a chunked response whose trailers say how the
// job ended, so a client can tell complete output from interrupted output.
// Over real HTTP: raw sockets on a manual clock for the exact cases (ok,
// deadline and idle stall mid-stream, a caller gone, a slow reader), and
// real clients (Beast, curl, a Python program) for the wire format.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iterator>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>

#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "common/thread_state.hpp"
#include "hourglass/clock.hpp"
#include "hourglass/server/http_server.hpp"
#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

constexpr auto npos = std::string::npos;

std::string post_request(const std::string& target, const std::string& body, const headers& hs) {
  std::string r = "POST " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
  for (const auto& [name, value] : hs) r += name + ": " + value + "\r\n";
  return r + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

// What ends a stream: the last chunk and its trailers, up to the blank line.
std::string trailers_of(const std::string& raw) {
  const auto at = raw.find("\r\n0\r\n");
  if (at == npos) return {};
  const auto end = raw.find("\r\n\r\n", at + 5);
  return end == npos ? std::string() : raw.substr(at + 5, end + 4 - (at + 5));
}

using ::hourglass::testing::this_thread_id;
using ::hourglass::testing::thread_sleeps;

// Reads on until the stream's trailers are in `raw` (or `limit` passes).
void read_to_the_end(raw_socket& s, std::string& raw, std::chrono::milliseconds limit = 5s) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (trailers_of(raw).empty() && std::chrono::steady_clock::now() < until) raw += s.read_until("\r\n\r\n", 100ms);
}

TEST(HttpServerStream, ChunksGoOutAsTheyAreWrittenAndTheTrailersSayOk) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send(post_request("/v1/jobs/stream", R"({"chunks": 3, "interval_ms": 100})", {{"Request-Timeout", "30S"}})));
  std::string raw = s.read_until("chunk 1 of 3\n", 5s);
  EXPECT_NE(raw.find("HTTP/1.1 200 OK\r\n"), npos) << raw;
  EXPECT_NE(raw.find("Transfer-Encoding: chunked\r\n"), npos) << raw;
  EXPECT_NE(raw.find("Trailer: Job-Outcome, Server-Timing\r\n"), npos) << raw;
  EXPECT_NE(raw.find("Content-Type: text/plain; charset=utf-8\r\n"), npos) << raw;
  EXPECT_NE(raw.find("d\r\nchunk 1 of 3\n\r\n"), npos) << "one write, one chunk: " << raw;
  for (const std::string next : {"chunk 2 of 3\n", "chunk 3 of 3\n"}) {
    ASSERT_TRUE(clk.wait_for_timers(3));  // the session's deadline, the worker's watch, the handler's sleep
    EXPECT_EQ(s.read_until(next, 50ms).find(next), npos) << "not before its time";
    clk.advance(100ms);
    raw = s.read_until(next, 5s);
    EXPECT_NE(raw.find(next), npos) << raw;
  }
  read_to_the_end(s, raw);
  EXPECT_EQ(trailers_of(raw), "Job-Outcome: ok\r\nServer-Timing: queue;dur=0.000, run;dur=200.000\r\n\r\n") << raw;
  EXPECT_EQ(srv.handler("stream").finished_ok, 1u);
  const auto m = srv.metrics();
  EXPECT_EQ(m.time_to_first_output.count, 1u);
  EXPECT_EQ(m.time_to_first_output.sum_ns, 0u) << "the first chunk went out before the clock moved";
  // The connection stays open for the next request.
  ASSERT_TRUE(s.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  EXPECT_NE(s.read_until("ok\n", 5s).find("200 OK"), npos);
}

TEST(HttpServerStream, AnHttpClientReadsTheBodyAndTheTrailers) {
  test_server srv(test_options());
  client c(srv.port());
  const reply r = c.post("/v1/jobs/stream", R"({"chunks": 3})");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.header("transfer-encoding"), "chunked");
  EXPECT_EQ(r.body, "chunk 1 of 3\nchunk 2 of 3\nchunk 3 of 3\n");
  EXPECT_EQ(r.header("job-outcome"), "ok");  // Beast's parser adds the trailers to the fields
  EXPECT_NE(r.header("server-timing").find("run;dur="), npos);
  // A stream that writes nothing is still a stream: its trailers say ok.
  const reply empty = c.post("/v1/jobs/stream", R"({"chunks": 0})");
  EXPECT_EQ(empty.status, 200u);
  EXPECT_EQ(empty.body, "");
  EXPECT_EQ(empty.header("job-outcome"), "ok");
  // Bad input, before any output: the handler's own status, as for any job.
  const reply bad = c.post("/v1/jobs/stream", R"({"chunks": "many"})");
  EXPECT_EQ(bad.status, 400u);
  EXPECT_EQ(json_string(bad.body, "error"), "invalid_argument");
  EXPECT_EQ(bad.header("job-outcome"), "");
  EXPECT_EQ(srv.metrics().time_to_first_output.count, 1u) << "only the stream that wrote";
}

TEST(HttpServerStream, TheDeadlineMidStreamEndsItWithTrailersNotA504) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send(post_request("/v1/jobs/stream", R"({"chunks": 5, "interval_ms": 100})", {{"Request-Timeout", "250m"}})));
  std::string raw = s.read_until("chunk 1 of 5\n", 5s);
  for (const std::string next : {"chunk 2 of 5\n", "chunk 3 of 5\n"}) {
    ASSERT_TRUE(clk.wait_for_timers(3));
    clk.advance(100ms);
    raw += s.read_until(next, 5s);
  }
  ASSERT_TRUE(clk.wait_for_timers(3));
  clk.advance(49ms);
  raw += s.read_until("\r\n0\r\n", 50ms);
  EXPECT_EQ(trailers_of(raw), "") << "not ended before the deadline: " << raw;
  clk.advance(1ms);  // 250 ms
  read_to_the_end(s, raw);
  EXPECT_NE(raw.find("HTTP/1.1 200 OK"), npos) << "the status line went out with the first chunk";
  EXPECT_NE(raw.find("chunk 3 of 5\n"), npos);
  EXPECT_EQ(raw.find("chunk 4 of 5"), npos);
  EXPECT_EQ(trailers_of(raw),
            "Job-Outcome: deadline_exceeded; stage=run\r\nServer-Timing: queue;dur=0.000, run;dur=250.000\r\n\r\n")
      << raw;
  const auto h = srv.handler("stream");
  EXPECT_EQ(h.expired_run, 1u);
  EXPECT_EQ(h.completed_late, 0u);
}

TEST(HttpServerStream, AStallMidStreamEndsItAtTheIdleLimitWithStageIdle) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(s.send(post_request("/v1/jobs/stream", R"({"chunks": 5, "interval_ms": 100, "stall_after": 2})",
                                  {{"Request-Timeout", "30S"}, {"Job-Idle-Timeout", "150m"}})));
  std::string raw = s.read_until("chunk 1 of 5\n", 5s);
  ASSERT_TRUE(clk.wait_for_timers(4));  // the deadline, the watch, the idle timer, the sleep
  clk.advance(100ms);
  raw += s.read_until("chunk 2 of 5\n", 5s);  // progress at 100 ms, then nothing more
  clk.advance(149ms);
  raw += s.read_until("\r\n0\r\n", 50ms);
  EXPECT_EQ(trailers_of(raw), "") << raw;
  clk.advance(1ms);  // 150 ms without progress; the deadline is 29.75 s away
  read_to_the_end(s, raw);
  EXPECT_NE(raw.find("chunk 2 of 5\n"), npos);
  EXPECT_EQ(trailers_of(raw),
            "Job-Outcome: deadline_exceeded; stage=idle\r\nServer-Timing: queue;dur=0.000, run;dur=250.000\r\n\r\n")
      << raw;
  EXPECT_EQ(srv.handler("stream").expired_idle, 1u);
}

TEST(HttpServerStream, ACallerThatGoesAwayMidStreamCancelsTheJob) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  {
    raw_socket s(srv.port());
    ASSERT_TRUE(
        s.send(post_request("/v1/jobs/stream", R"({"chunks": 5, "interval_ms": 100})", {{"Request-Timeout", "30S"}})));
    ASSERT_NE(s.read_until("chunk 1 of 5\n", 5s).find("chunk 1 of 5"), npos);
  }  // gone, with the job sleeping before its second chunk
  ASSERT_TRUE(wait_until([&] { return srv.handler("stream").finished_cancelled == 1; })) << "the job was not cancelled";
  EXPECT_EQ(srv.handler("stream").finished_ok, 0u);
}

// A handler that writes 64 KiB chunks as fast as it may, to a reader that
// reads nothing: the channel fills, the socket's buffers fill, and the
// handler waits. That wait is not progress: the idle limit stops it.
TEST(HttpServerStream, ASlowReaderHoldsTheHandlerBackAndTheWaitIsNotProgress) {
  manual_clock clk;
  std::atomic<std::uint64_t> written{0};
  std::atomic<int> inside_write{0};
  std::atomic<long> handler_thread{0};
  std::mutex job_mu;
  std::optional<context> job;  // the handler's context, kept to look at its stop
  server_options o = test_options();
  o.write_timeout = 120s;  // the session's write timeout (real time) is not what is tested here
  test_server srv(
      o,
      [&](http_server& h) {
        h.add_stream_handler("flood", "application/octet-stream",
                             [&](const context& ctx, const request_view&, output_stream& out) {
                               {
                                 const std::lock_guard lock(job_mu);
                                 job = ctx;
                               }
                               handler_thread.store(this_thread_id());
                               const std::string chunk(64 * 1024, 'x');
                               for (;;) {
                                 inside_write.store(1);
                                 out.write(chunk);
                                 inside_write.store(0);
                                 written.fetch_add(chunk.size());
                               }
                             });
      },
      clk);
  raw_socket s(srv.port(), 4096);
  ASSERT_TRUE(s.send(post_request("/v1/jobs/flood", "", {{"Request-Timeout", "30S"}, {"Job-Idle-Timeout", "1S"}})));
  // Held back: the handler's thread asleep inside one write, its output the
  // same, for 200 ms in a row (appending 64 KiB never sleeps; only waiting for
  // the reader does, and a reader whose window is shut lets nothing more out).
  // Two looks a poll apart were not enough: under TSan a write can wait a few
  // milliseconds for the server's I/O thread, then go on.
  std::uint64_t held_at = 0;
  auto held_since = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until(
      [&] {
        const auto now_written = written.load();
        const bool asleep = inside_write.load() == 1 && handler_thread.load() != 0 &&
                            thread_sleeps(handler_thread.load()) && inside_write.load() == 1 &&
                            written.load() == now_written;  // asleep, and inside the same write all along
        const auto now = std::chrono::steady_clock::now();
        if (!asleep || now_written != held_at) {
          held_at = now_written;
          held_since = now;
          return false;
        }
        return now - held_since >= 200ms;
      },
      60s))
      << "the handler was never held back";
  EXPECT_LT(held_at, 64u << 20) << "the output waiting for the reader is bounded";
  const context ctx = [&] {
    const std::lock_guard lock(job_mu);
    return *job;
  }();
  // The idle limit's timer runs inside advance(), on this thread: what it
  // stops is stopped when advance() returns.
  clk.advance(1s - 1ms);
  EXPECT_FALSE(ctx.token().stop_requested()) << "stopped before a second without progress";
  EXPECT_EQ(srv.handler("flood").expired_idle, 0u);
  EXPECT_EQ(written.load(), held_at);
  clk.advance(1ms);  // a second without progress, though it wanted to write all along
  EXPECT_TRUE(ctx.token().stop_requested()) << "stopped at once, by the idle limit's timer";
  EXPECT_EQ(ctx.stop_status(), status::expired(expiry_stage::idle));
  ASSERT_TRUE(wait_until([&] { return srv.handler("flood").expired_idle == 1; }));
  // Now the reader reads: everything the handler wrote arrives, then the trailers.
  std::string raw;
  while (raw.find("Job-Outcome") == npos) {
    const std::string more = s.read_until("Job-Outcome", 10s);
    ASSERT_FALSE(more.empty()) << "the stream stopped after " << raw.size() << " bytes";
    raw += more;
  }
  read_to_the_end(s, raw);
  const auto end = raw.find("\r\n0\r\nJob-Outcome");
  const auto body = raw.find("\r\n\r\n");  // the head's own x's (its Content-Security-Policy's) are not output
  ASSERT_NE(end, npos);
  ASSERT_LT(body, end);
  EXPECT_EQ(static_cast<std::uint64_t>(std::count(raw.begin() + static_cast<std::ptrdiff_t>(body),
                                                  raw.begin() + static_cast<std::ptrdiff_t>(end), 'x')),
            held_at);
  EXPECT_NE(trailers_of(raw).find("Job-Outcome: deadline_exceeded; stage=idle\r\n"), npos) << trailers_of(raw);
}

// A reader that takes nothing for --write-timeout (real time here; the job's
// own clock stands still) is a caller gone: the job is cancelled.
TEST(HttpServerStream, AReaderThatStopsReadingIsCutOffByTheWriteTimeoutAndItsJobCancelled) {
  manual_clock clk;
  server_options o = test_options();
  o.write_timeout = 300ms;
  o.body_timeout = 120s;  // not this one: the request's body came whole
  test_server srv(
      o,
      [](http_server& h) {
        h.add_stream_handler("flood", "application/octet-stream",
                             [](const context&, const request_view&, output_stream& out) {
                               const std::string chunk(64 * 1024, 'x');
                               for (;;) out.write(chunk);
                             });
      },
      clk);
  raw_socket s(srv.port(), 4096);
  ASSERT_TRUE(s.send(post_request("/v1/jobs/flood", "", {{"Request-Timeout", "30S"}})));
  ASSERT_TRUE(wait_until([&] { return srv.handler("flood").finished_cancelled == 1; }, 10s))
      << "the job outlived its reader";
  EXPECT_EQ(srv.handler("flood").expired_run + srv.handler("flood").expired_idle, 0u);
  const auto [rest, closed] = s.read_until_close(10s);
  EXPECT_TRUE(closed) << "the connection was closed";
  EXPECT_NE(rest.find("Trailer: Job-Outcome"), npos) << "the stream had begun";
  EXPECT_EQ(trailers_of(rest), "") << "no last chunk: the stream was cut off";
}

// The write timeout bounds a reader that stops reading, not a handler that
// thinks between chunks: its own deadline and idle limit bound that.
TEST(HttpServerStream, AHandlerQuietLongerThanTheWriteTimeoutBetweenChunksStillStreams) {
  manual_clock clk;
  server_options o = test_options();
  o.write_timeout = 200ms;
  test_server srv(
      o,
      [](http_server& h) {
        h.add_stream_handler("thinker", "text/plain", [](const context&, const request_view&, output_stream& out) {
          out.write("first\n");
          std::this_thread::sleep_for(700ms);  // real time, as the write timeout is: three of them
          out.write("second\n");
        });
      },
      clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(s.send(post_request("/v1/jobs/thinker", "", {{"Request-Timeout", "30S"}})));
  std::string raw;
  read_to_the_end(s, raw, 10s);
  EXPECT_NE(raw.find("second"), npos) << raw;
  EXPECT_NE(trailers_of(raw).find("Job-Outcome: ok\r\n"), npos) << raw;
  EXPECT_EQ(srv.handler("thinker").finished_cancelled, 0u);
}

// A request pipelined behind a stream is answered after the stream's trailers.
TEST(HttpServerStream, ARequestPipelinedBehindAStreamIsAnsweredAfterIt) {
  manual_clock clk;
  test_server srv(test_options(), {}, clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(
      s.send(post_request("/v1/jobs/stream", R"({"chunks": 2, "interval_ms": 100})", {{"Request-Timeout", "30S"}}) +
             "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  std::string raw = s.read_until("chunk 1 of 2\n", 5s);
  ASSERT_TRUE(clk.wait_for_timers(3));
  EXPECT_EQ(raw.find("ok\n"), npos) << "not before the stream ends: " << raw;
  clk.advance(100ms);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (raw.find("\r\n\r\nok\n") == npos && std::chrono::steady_clock::now() < until) {
    raw += s.read_until("ok\n", 100ms);
  }
  const auto trailers = raw.find("Job-Outcome: ok\r\n");
  const auto health = raw.find("\r\n\r\nok\n");
  ASSERT_NE(trailers, npos) << raw;
  ASSERT_NE(health, npos) << raw;
  EXPECT_LT(trailers, health);
}

TEST(HttpServerStream, AFailureAfterTheFirstBytesIsToldInTheTrailers) {
  test_server srv(test_options(), [](http_server& h) {
    h.add_stream_handler("half", "text/plain", [](const context&, const request_view& req, output_stream& out) {
      out.write("first part\n");
      if (req.body == "fail") throw handler_error::bad_input("the second part is bad");
      out.write("second part\n");
    });
  });
  client c(srv.port());
  const reply failed = c.post("/v1/jobs/half", "fail");
  EXPECT_EQ(failed.status, 200u) << "the status line went out with the first part";
  EXPECT_EQ(failed.body, "first part\n");
  EXPECT_EQ(failed.header("job-outcome"), "error");
  const reply fine = c.post("/v1/jobs/half", "");
  EXPECT_EQ(fine.body, "first part\nsecond part\n");
  EXPECT_EQ(fine.header("job-outcome"), "ok");
  const auto h = srv.handler("half");
  EXPECT_EQ(h.finished_error, 1u);
  EXPECT_EQ(h.finished_ok, 1u);
}

TEST(HttpServerStream, AnAsyncStreamJobKeepsItsOutputAsItsResult) {
  test_server srv(test_options());
  client c(srv.port());
  const reply accepted = c.post("/v1/jobs/stream", R"({"chunks": 2})", {{"Prefer", "respond-async"}});
  ASSERT_EQ(accepted.status, 202u) << accepted.body;
  const std::string loc = accepted.header("location");
  ASSERT_TRUE(wait_until([&] { return json_string(c.get(loc).body, "state") == "ok"; }));
  EXPECT_EQ(json_string(c.get(loc).body, "result"), "chunk 1 of 2\nchunk 2 of 2\n");
}

// A handler that ignores its context mid-stream: at the deadline it gets
// the same grace as any handler, then the stream ends without it.
TEST(HttpServerStream, AHandlerThatIgnoresItsDeadlineMidStreamIsEndedAfterTheGrace) {
  manual_clock clk;
  std::latch release{1};
  std::atomic<bool> returned{false};
  test_server srv(
      test_options(),
      [&](http_server& h) {
        h.add_stream_handler("stubborn", "text/plain", [&](const context&, const request_view&, output_stream& out) {
          out.write("started\n");
          release.wait();  // deaf to its context
          returned = true;
        });
      },
      clk);
  raw_socket s(srv.port());
  ASSERT_TRUE(s.send(post_request("/v1/jobs/stubborn", "", {{"Request-Timeout", "200m"}})));
  std::string raw = s.read_until("started\n", 5s);
  ASSERT_TRUE(clk.wait_for_timers(2));  // the session's deadline, the worker's watch
  clk.advance(200ms);
  ASSERT_TRUE(clk.wait_for_timers(1)) << "the grace is armed";
  clk.advance(99ms);
  raw += s.read_until("\r\n0\r\n", 50ms);
  EXPECT_EQ(trailers_of(raw), "") << "within the grace: " << raw;
  clk.advance(1ms);
  read_to_the_end(s, raw);
  EXPECT_EQ(trailers_of(raw),
            "Job-Outcome: deadline_exceeded; stage=run\r\nServer-Timing: queue;dur=0.000, run;dur=300.000\r\n\r\n")
      << raw;
  EXPECT_FALSE(returned.load());
  release.count_down();
  ASSERT_TRUE(wait_until([&] { return srv.handler("stubborn").completed_late == 1; }));
  // The connection goes on to the next request.
  ASSERT_TRUE(s.send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"));
  EXPECT_NE(s.read_until("ok\n", 5s).find("200 OK"), npos);
}

TEST(HttpServerStream, AnHttp10CallerGetsTheBytesUntilTheConnectionCloses) {
  test_server srv(test_options());
  raw_socket s(srv.port());
  const std::string body = R"({"chunks": 2})";
  ASSERT_TRUE(
      s.send("POST /v1/jobs/stream HTTP/1.0\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  const auto [raw, closed] = s.read_until_close(5s);
  EXPECT_TRUE(closed);
  EXPECT_NE(raw.find(" 200 OK\r\n"), npos) << raw;
  EXPECT_EQ(raw.find("chunked"), npos) << "HTTP/1.0 has no chunked encoding: " << raw;
  EXPECT_NE(raw.find("Connection: close\r\n"), npos) << raw;
  EXPECT_EQ(raw.substr(raw.find("\r\n\r\n") + 4), "chunk 1 of 2\nchunk 2 of 2\n");
}

TEST(HttpServerStream, AnEmptyWriteIsNotOutputSoAFailureAfterItKeepsItsStatus) {
  test_server srv(test_options(), [](http_server& h) {
    h.add_stream_handler("picky", "text/plain", [](const context&, const request_view&, output_stream& out) {
      out.write("");
      throw handler_error::bad_input("no");
    });
  });
  const reply r = post(srv.port(), "/v1/jobs/picky", "");
  EXPECT_EQ(r.status, 400u) << r.body;
  EXPECT_EQ(srv.metrics().time_to_first_output.count, 0u);
}

// An 18-byte request could make a 15 MB result that the store then held:
// an async job keeps at most --max-result, a stream's output stopped at the
// write that passes it, any handler's result judged when it returns; never
// retried (the same work makes the same result). A sync stream is not kept,
// so it is not bounded by it.
TEST(HttpServerStream, AnAsyncJobKeepsAtMostMaxResult) {
  server_options o = test_options();
  o.max_result = 64 * 1024;
  std::atomic<int> writes{0}, runs{0};
  test_server srv(o, [&](http_server& h) {
    h.add_stream_handler("huge", "text/plain", [&](const context&, const request_view&, output_stream& out) {
      const std::string kib(1024, 'x');
      for (int i = 0; i < 1000; ++i) {
        out.write(kib);
        ++writes;
      }
    });
    h.add_handler("big", [&](const context&, const request_view& req) {
      ++runs;
      return handler_result{std::string(64 * 1024 + (req.body == "over" ? 1 : 0), 'y'), "text/plain"};
    });
  });
  client c(srv.port());
  const auto ended = [&](const std::string& target, const std::string& body, const headers& extra = {}) {
    headers h{{"Prefer", "respond-async"}};
    h.insert(h.end(), extra.begin(), extra.end());
    const reply accepted = c.post(target, body, h);
    EXPECT_EQ(accepted.status, 202u) << accepted.body;
    const std::string loc = accepted.header("location");
    EXPECT_TRUE(wait_until([&] {
      const std::string s = json_string(c.get(loc).body, "state");
      return s != "queued" && s != "running" && s != "scheduled";
    }));
    return c.get(loc).body;
  };
  const std::string stream = ended("/v1/jobs/huge", "");
  EXPECT_EQ(json_string(stream, "error"), "result_too_large") << stream;
  EXPECT_EQ(writes.load(), 64) << "stopped at the write past it, not after all of them";
  const std::string exactly = ended("/v1/jobs/big", "at");
  EXPECT_EQ(json_string(exactly, "state"), "ok");
  EXPECT_EQ(json_string(exactly, "result").size(), 64u * 1024);
  const std::string over = ended("/v1/jobs/big", "over", {{"Job-Attempts", "3"}, {"Job-Backoff", "1m"}});
  EXPECT_EQ(json_string(over, "state"), "error") << over;
  EXPECT_EQ(json_string(over, "error"), "result_too_large") << over;
  EXPECT_EQ(runs.load(), 2) << "one run each: a result too large is not retried";
  const reply sync = c.post("/v1/jobs/huge", "");
  EXPECT_EQ(sync.status, 200u);
  EXPECT_EQ(sync.body.size(), 1000u * 1024) << "a sync stream goes out as it comes, unbounded by --max-result";
}

// A `call` to an upstream's stream that was cut off is not a success: the
// caller sees the upstream's deadline, as for a 504.
TEST(HttpServerStream, ACallToAStreamThatWasCutOffIsADownstreamDeadline) {
  server_options up = test_options();
  up.default_budget = up.max_budget = 150ms;  // the upstream's deadline comes long before the caller's
  test_server upstream(up);
  server_options o = test_options();
  o.upstreams = {{"up", upstream.url()}};
  test_server caller(o);
  client c(caller.port());
  const reply cut = c.post("/v1/jobs/call",
                           R"({"upstream": "up", "handler": "stream", "body": {"chunks": 5, "interval_ms": 100}})",
                           {{"Request-Timeout", "3S"}});
  EXPECT_EQ(cut.status, 504u) << cut.body;
  EXPECT_EQ(json_string(cut.body, "stage"), "downstream") << cut.body;
  EXPECT_TRUE(wait_until([&] { return upstream.handler("stream").expired_run == 1u; }));
  const reply whole = c.post("/v1/jobs/call", R"({"upstream": "up", "handler": "stream", "body": {"chunks": 2}})", {});
  EXPECT_EQ(whole.status, 200u) << whole.body;
  EXPECT_EQ(whole.body, "chunk 1 of 2\nchunk 2 of 2\n");
}

// The wire format as real clients see it. curl --raw prints the chunked
// framing and the trailers as they came.
TEST(HttpServerStream, CurlShowsTheTrailers) {
  ASSERT_EQ(run_command("command -v curl").second, 0) << "curl is not installed (tools/install-deps installs it)";
  test_server srv(test_options());
  const auto [out, rc] = run_command(
      "curl -sS --raw -H 'Request-Timeout: 30S' -H 'Job-Idle-Timeout: 200m' -d '"
      R"({"chunks": 5, "interval_ms": 20, "stall_after": 2})"
      "' " +
      srv.url() + "/v1/jobs/stream");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("chunk 2 of 5\n"), npos) << out;
  EXPECT_EQ(out.find("chunk 3 of 5"), npos) << out;
  EXPECT_NE(out.find("\r\n0\r\nJob-Outcome: deadline_exceeded; stage=idle\r\nServer-Timing: queue;dur="), npos) << out;
}

TEST(HttpServerStream, APythonClientTellsCompleteFromInterruptedOutput) {
  ASSERT_EQ(run_command("command -v python3").second, 0) << "python3 is not installed";
  test_server srv(test_options());
  const std::string client = std::string("python3 ") + HOURGLASS_SOURCE_DIR + "/tests/server/stream_client.py ";
  const auto run = [&](const std::string& body, const std::string& header, const std::string& flags = "") {
    const auto [out, rc] = run_command(client + flags + srv.url() + "/v1/jobs/stream '" + body + "' '" + header + "'");
    EXPECT_EQ(rc, 0) << out;
    boost::system::error_code ec;
    auto v = boost::json::parse(out, ec);
    EXPECT_FALSE(ec) << out;
    return ec ? boost::json::object() : v.as_object();
  };
  const auto ok = run(R"({"chunks": 3, "interval_ms": 10})", "Request-Timeout: 30S");
  ASSERT_TRUE(ok.contains("chunks")) << ok;
  EXPECT_EQ(ok.at("status").as_int64(), 200);
  EXPECT_EQ(ok.at("chunks").as_array().size(), 3u) << ok;
  EXPECT_EQ(ok.at("trailers").at("job-outcome").as_string(), "ok");
  EXPECT_TRUE(ok.at("complete").as_bool());
  const auto cut = run(R"({"chunks": 5, "interval_ms": 100})", "Request-Timeout: 250m");
  ASSERT_TRUE(cut.contains("chunks")) << cut;
  EXPECT_EQ(cut.at("status").as_int64(), 200);
  EXPECT_GE(cut.at("chunks").as_array().size(), 2u) << cut;
  EXPECT_LE(cut.at("chunks").as_array().size(), 3u) << cut;
  EXPECT_EQ(cut.at("trailers").at("job-outcome").as_string(), "deadline_exceeded; stage=run") << cut;
  EXPECT_NE(cut.at("trailers").at("server-timing").as_string().find("run;dur="), npos);
  const auto stalled = run(R"({"chunks": 5, "interval_ms": 10, "stall_after": 2})", "Job-Idle-Timeout: 200m");
  ASSERT_TRUE(stalled.contains("chunks")) << stalled;
  EXPECT_EQ(stalled.at("chunks").as_array().size(), 2u) << stalled;
  EXPECT_EQ(stalled.at("trailers").at("job-outcome").as_string(), "deadline_exceeded; stage=idle") << stalled;
  EXPECT_TRUE(stalled.at("complete").as_bool()) << "ended by its last chunk, interrupted by its outcome";
  // A caller that leaves after one chunk: the job is cancelled, not run on.
  const auto left = run(R"({"chunks": 50, "interval_ms": 100})", "Request-Timeout: 30S", "--leave-after 1 ");
  ASSERT_TRUE(left.contains("chunks")) << left;
  EXPECT_FALSE(left.at("complete").as_bool());
  ASSERT_TRUE(wait_until([&] { return srv.handler("stream").finished_cancelled == 1; }))
      << "the job outlived its caller";
}

}  // namespace
}  // namespace hourglass::server::testing
