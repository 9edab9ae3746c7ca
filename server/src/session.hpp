// One HTTP/1.1 connection: reads requests, routes them, runs jobs, writes
// responses, all on the connection's strand. Internal to the server.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "clock_timer.hpp"
#include "connection_timer.hpp"
#include "core.hpp"
#include "hourglass/output_channel.hpp"
#include "job_input.hpp"
#include "request_rules.hpp"
#include "responses.hpp"

namespace hourglass::server::detail {

// A sync job's race between its start and its deadline's answer.
enum class job_phase : int { queued, running, abandoned };

class session : public std::enable_shared_from_this<session> {
 public:
  session(core& c, boost::asio::ip::tcp::socket socket);
  ~session();
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  void start();
  // Drain: close now if waiting for a request, else after the current answer. Any thread.
  void close_when_idle();

 private:
  using error_code = boost::system::error_code;
  enum class phase { waiting, headers, body, job, closed };

  // The sync job in flight on this connection.
  struct sync_call {
    std::atomic<job_phase> phase{job_phase::queued};
    job_ref ref;
    const handler_entry* entry = nullptr;
    duration budget{};
    time_point deadline{};
    time_point submitted_at{};
    sync_state state = sync_state::waiting;            // strand only (request_rules.hpp)
    unsigned early_status = 0;                         // strand only: the status sent at the deadline, if any
    std::optional<job_result<handler_result>> result;  // strand only: the outcome, once in
    // While the handler runs: its context, so a 504 sent at the deadline can
    // say whether the job already crossed a commit point (not a copy: a
    // copy would keep the context alive after its job).
    std::mutex running_mu;
    const context* running = nullptr;
    bool committed_after_run = false;      // set as the handler returns, before its outcome reaches the strand
    std::optional<time_point> started_at;  // when the handler began (under running_mu)
    // The timings of an answer sent before the outcome (at the deadline or
    // the grace's end): queued until the handler began, running since.
    job_timings timings_so_far(time_point now) {
      std::lock_guard lock(running_mu);
      job_timings t;
      t.budget = budget;
      t.queue_delay = elapsed(submitted_at, started_at.value_or(now));
      if (started_at) {
        t.ran = true;
        t.run_time = elapsed(*started_at, now);
      }
      t.committed = running != nullptr ? running->committed() : committed_after_run;  // a change may have happened
      return t;
    }
    // A streaming handler's output on its way out (session_stream.cpp); the
    // flags are the strand's.
    std::shared_ptr<output_channel> out;
    bool stream_started = false;  // its status line is to go out first
    bool head_sent = false;
    bool stream_ending = false;  // the trailers go out once the buffered bytes have
    bool stream_done = false;    // the last chunk, with the trailers, is out
  };

  void read_request();
  void read_header();
  void on_header(error_code ec);
  void route();
  void start_job(std::string_view name);
  void read_body();
  void on_body(error_code ec);
  void submit_sync(std::shared_ptr<job_input> in);
  void watch();
  void on_watch(error_code ec, std::size_t n);
  void stop_watching();
  void on_deadline(const std::shared_ptr<sync_call>& call);
  void on_job_done(const std::shared_ptr<sync_call>& call, job_result<handler_result>&& r);
  void step(const std::shared_ptr<sync_call>& call, sync_event e);
  // Streaming (session_stream.cpp).
  void notify_when_readable(const std::shared_ptr<sync_call>& call);
  void on_stream_readable(const std::shared_ptr<sync_call>& call);
  void begin_stream(const std::shared_ptr<sync_call>& call, bool first_output);
  void end_stream(const std::shared_ptr<sync_call>& call, const status& st, const job_timings& t);
  void pump_stream();
  void on_stream_write(error_code ec);
  void on_stream_broken();
  void send(response res);
  std::function<void(response)> answer_later();
  void send_error(unsigned status, std::string_view code, std::string_view message);
  void on_write(error_code ec);
  void maybe_continue();
  void do_close();
  void on_io_timeout();
  // An operation's error as the timeout that caused it, when one did.
  error_code seen(error_code ec) const;
  bool authorized() const;
  bool body_unread() const;

  core& core_;
  std::shared_ptr<connection_registry> registry_;
  boost::asio::ip::tcp::socket stream_;
  // The connection's strand (stream_'s executor; with one I/O thread an
  // implicit one: core::connection_executor).
  const boost::asio::any_io_executor strand_;
  connection_timer io_timer_;  // the socket timeouts; on expiry, on_io_timeout
  bool timed_out_ = false;     // it expired: the socket is closed
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::empty_body>> header_parser_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> body_parser_;
  clock_timer deadline_timer_;  // the sync call's deadline, then its grace, on the daemon's clock
  std::string remote_;          // the peer's addr:port
  time_point headers_at_{};
  response res_;      // the response being written: its body, after
  std::string head_;  // its head (append_head)
  std::shared_ptr<sync_call> call_;
  // A streamed response's head, the chunk being written, and its trailers.
  std::optional<boost::beast::http::response<boost::beast::http::empty_body>> stream_head_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> stream_head_writer_;
  std::string stream_bytes_;
  boost::beast::http::fields stream_trailers_;

  // The job being read (between headers and body).
  const handler_entry* entry_ = nullptr;
  duration budget_{};
  duration freshness_{};
  duration idle_limit_ = duration::max();  // Job-Idle-Timeout
  bool async_ = false;

  bool req_keep_alive_ = true;
  bool req_head_ = false;
  bool req_http10_ = false;  // no chunked encoding: a stream's body ends with the connection
  phase phase_ = phase::waiting;
  bool watching_ = false;
  bool writing_ = false;
  bool close_after_ = false;
};

}  // namespace hourglass::server::detail
