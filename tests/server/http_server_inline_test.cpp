// handler_options::run_inline: a sync job of a tiny handler is run by the
// connection's I/O thread when nothing is queued and a worker idles, and is
// otherwise queued for a worker; either way it is admitted, answered and
// counted as any job.
#include "hourglass/server/http_server.hpp"

#include <gtest/gtest.h>

#include <future>
#include <sstream>
#include <thread>

#include "test_support.hpp"

namespace hourglass::server::testing {
namespace {

std::string this_thread_name() {
  std::ostringstream os;
  os << std::this_thread::get_id();
  return os.str();
}

handler_fn thread_reporter() {
  return [](const context&, const request_view&) { return handler_result{this_thread_name(), "text/plain"}; };
}

handler_options in_place() {
  handler_options o;
  o.run_inline = true;
  return o;
}

// One worker, a handler that reports its thread from that worker
// ("worker"), the same run inline ("inline"), and an inline one that fails.
struct one_worker_server {
  test_server srv{
      [] {
        server_options o = test_options();
        o.workers = 1;
        o.io_threads = 1;  // as bench/http/echo_vs_nginx.sh runs it: no strands
        o.drain_timeout = duration::zero();
        return o;
      }(),
      [](http_server& s) {
        s.add_handler("worker", thread_reporter());
        s.add_handler("inline", thread_reporter(), in_place());
        s.add_handler(
            "inline-bad",
            [](const context&, const request_view&) -> handler_result { throw handler_error::bad_input("no"); },
            in_place());
        s.add_stream_handler(
            "inline-stream", "text/plain",
            [](const context&, const request_view&, output_stream& out) { out.write(this_thread_name()); }, in_place());
      }};

  bool worker_idles() {
    return wait_until([&] { return srv.get().jobs().idle() == 1; });
  }
  std::string worker_thread() {
    const reply r = post(srv.port(), "/v1/jobs/worker", "");
    EXPECT_EQ(r.status, 200u) << r.error;
    return r.body;
  }
};

TEST(HttpServerInline, RunsOnTheIoThreadWhenAWorkerIdles) {
  one_worker_server w;
  const std::string worker = w.worker_thread();
  ASSERT_TRUE(w.worker_idles());
  const reply r = post(w.srv.port(), "/v1/jobs/inline", "", {{"Request-Timeout", "2S"}});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_NE(r.body, worker) << "run in the worker's place, not by it";
  EXPECT_NE(r.header("server-timing").find("run;dur="), std::string::npos);
  const auto h = w.srv.handler("inline");
  EXPECT_EQ(h.admitted, 1u);
  EXPECT_EQ(h.finished_ok, 1u);
  EXPECT_EQ(w.srv.get().jobs().busy(), 0u);
  EXPECT_EQ(w.srv.get().jobs().idle(), 1u) << "the worker's place is given back";
}

TEST(HttpServerInline, AnInlineFailureIsAnsweredAndCountedAsAnyJob) {
  one_worker_server w;
  ASSERT_TRUE(w.worker_idles());
  const reply r = post(w.srv.port(), "/v1/jobs/inline-bad", "");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(json_string(r.body, "error"), "invalid_argument");
  const auto h = w.srv.handler("inline-bad");
  EXPECT_EQ(h.admitted, 1u);
  EXPECT_EQ(h.finished_error, 1u);
}

TEST(HttpServerInline, QueuedForAWorkerWhenNoneIdles) {
  one_worker_server w;
  const std::string worker = w.worker_thread();
  client busy(w.srv.port());
  auto sleeping = std::async(std::launch::async, [&] { return busy.post("/v1/jobs/sleep", R"({"ms": 300})"); });
  ASSERT_TRUE(wait_until([&] { return w.srv.metrics().workers_busy == 1; }));
  client waiting(w.srv.port());
  auto queued = std::async(std::launch::async, [&] { return waiting.post("/v1/jobs/inline", ""); });
  ASSERT_TRUE(wait_until([&] { return w.srv.metrics().queue_depth == 1; })) << "queued, not run by the I/O thread";
  EXPECT_EQ(sleeping.get().status, 200u);
  const reply r = queued.get();
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, worker) << "the worker ran it once it was free";
  EXPECT_EQ(w.srv.handler("inline").finished_ok, 1u);
}

TEST(HttpServerInline, StreamingHandlersAlwaysGoToAWorker) {
  one_worker_server w;
  const std::string worker = w.worker_thread();
  ASSERT_TRUE(w.worker_idles());
  const reply r = post(w.srv.port(), "/v1/jobs/inline-stream", "");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.body, worker) << "its bytes go out while it runs, so the I/O thread must stay free";
}

TEST(HttpServerInline, EchoAnswersAndIsCountedAsBefore) {
  one_worker_server w;
  ASSERT_TRUE(w.worker_idles());
  for (int i = 0; i < 20; ++i) {
    const reply r = post(w.srv.port(), "/v1/jobs/echo", "hello " + std::to_string(i), {{"Content-Type", "text/plain"}});
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.body, "hello " + std::to_string(i));
    EXPECT_EQ(r.header("content-type"), "text/plain");
  }
  const auto h = w.srv.handler("echo");
  EXPECT_EQ(h.admitted, 20u);
  EXPECT_EQ(h.finished_ok, 20u);
  const reply m = get(w.srv.port(), "/metrics");
  EXPECT_EQ(metric_value(m.body, R"(hourglass_jobs_finished_total{handler="echo",outcome="ok"})"), 20.0);
}

}  // namespace
}  // namespace hourglass::server::testing
