// hourglassd as a library: an HTTP/1.1 server (Boost.Beast) in front of a
// hourglass::executor, serving the HTTP API of docs/reference/http-api.md.
//
//   hourglass::server::server_options o;
//   o.listen = "127.0.0.1:0";
//   hourglass::server::http_server srv(o);
//   srv.add_handler("hello", [](const hourglass::context&, const request_view&) {
//     return handler_result{"hi\n", "text/plain"};
//   });
//   srv.start();                    // binds; srv.port() is the port
//   ...
//   srv.drain();                    // what SIGTERM does in hourglassd
//
// A request's path:
//   headers read (the budget starts now) -> auth (401) -> route (404, 405)
//   -> Content-Length > max_body (413, before reading the body) -> budget
//   headers (400 invalid_timeout) -> draining (503 shutting_down) -> body
//   read -> executor.submit -> one outcome -> response (or 499 in the log
//   when the caller went away).
//  - Sync jobs: the deadline is (headers arrived) + budget. While the job
//    waits or runs the socket is still read, so a disconnect cancels the job
//    (cancelled/caller_gone). If the outcome is not in by the deadline
//    (a job still queued, or a handler that ignores its context), the
//    client gets 504 then; the job's own outcome still comes later and is
//    logged and counted.
//  - Async jobs (Prefer: respond-async): 202 + Location; bounded store of
//    states and results (async_ttl, async_max_jobs).
//  - Drain: readyz 503, new jobs 503 shutting_down, jobs run until
//    drain_timeout then are cancelled (cause shutdown: 503 to their callers),
//    every open request is answered, then the listener and connections close.
//
// Threads: io_threads serve sockets; `workers` run handlers. Handlers may
// block their worker (sleep and call do, on Asio operations bound to their
// context).
//
// Thread safety: add_handler only before start(). start, drain and wait
// from any thread but not from a handler or an I/O thread. The other
// members may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "hourglass/clock.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/server/handler.hpp"
#include "hourglass/server/options.hpp"
#include "hourglass/server/upstream_client.hpp"

namespace boost::asio {
class io_context;
}

namespace hourglass::server {

class http_server {
 public:
  // Throws std::invalid_argument for invalid options (validate()).
  // `clk` is the daemon's one clock: budgets start, deadlines and the grace
  // are answered, queued jobs expire and pooled connections age on it (tests
  // pass a manual_clock). Socket I/O timeouts (header, body, idle) are the
  // kernel's business and stay on real time. `clk` must outlive the server.
  explicit http_server(server_options options, hourglass::clock& clk = real_clock());
  // Drains with no grace if still running.
  ~http_server();
  http_server(const http_server&) = delete;
  http_server& operator=(const http_server&) = delete;

  // Registers a handler for POST /v1/jobs/{name}. Throws std::logic_error
  // after start(), for a duplicate, or for an invalid name (valid_handler_name).
  void add_handler(const std::string& name, handler_fn fn, handler_options options = {});
  // Registers a handler whose output is streamed (handler.hpp, output_stream)
  // as `content_type`. The same rules and errors as add_handler.
  void add_stream_handler(const std::string& name, std::string content_type, stream_handler_fn fn,
                          handler_options options = {});

  // Reads the token file, binds the listen address and starts serving.
  // Throws std::runtime_error when the address cannot be bound or the token
  // file cannot be read.
  void start();

  // Serves a connected stream socket accepted elsewhere (socket activation,
  // an in-process peer on a socketpair, the request fuzzer) exactly as if
  // the listener had accepted it, under the same limits. Takes `fd`.
  // Throws std::logic_error before start() or after a drain began.
  void adopt_connection(int fd);

  // The bound port and "addr:port" (after start()).
  std::uint16_t port() const noexcept;
  std::string local_address() const;

  // Drains (see above) and stops. Blocks until done; later calls return at once.
  void drain();
  // Blocks until a drain, started by any thread, has finished.
  void wait();
  // True while admitting jobs (readyz 200).
  bool ready() const noexcept;

  // From inside a handler (on its worker): enqueues an async child job of
  // the job `parent` is, its freshness and whole deadline cut to what the
  // parent's context has left minus --call-reserve (handler.hpp,
  // child_job), and waits for the store's answer. An async parent is named
  // by the child (its job object's "parent"), lists the child (its
  // "children"), and cancelling it cancels the child (cause "parent").
  //
  //   srv.add_handler("order", [&srv](const context& ctx, const request_view& req) {
  //     const child_answer a = srv.enqueue_child(ctx, req, {.handler = "ship", .body = "17",
  //                                                         .deadline = std::chrono::seconds(10)});
  //     ...  // a.deadline: at most what the order had left, never 10 s past it
  //   });
  child_answer enqueue_child(const context& ctx, const request_view& parent, child_job job);

  hourglass::executor& jobs() noexcept;
  upstream_client& upstreams() noexcept;
  // For handlers doing their own Asio I/O (bind it with asio_cancellation).
  boost::asio::io_context& io_context() noexcept;
  const server_options& options() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace hourglass::server
