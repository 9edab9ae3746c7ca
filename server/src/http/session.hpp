// One HTTP/1.1 connection: reads requests, routes them, runs jobs, writes
// responses, all on the connection's strand. It reads, asks the pure rules
// (request_rules.hpp) what to do, and writes: session.cpp reads and writes,
// session_sync.cpp runs a sync call, session_stream.cpp streams its output.
// Internal to the server.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/fields.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/string_body.hpp>

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "core/core.hpp"
#include "core/job_input.hpp"
#include "hourglass/output_channel.hpp"
#include "http/clock_timer.hpp"
#include "http/connection_timer.hpp"
#include "http/request_rules.hpp"
#include "http/responses.hpp"
#include "http/sync_call.hpp"

namespace hourglass::server::detail {

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

  void read_request();
  void read_header();
  void on_header(error_code ec);
  void route();
  void start_job(std::string_view name);
  void start_signal();
  void continue_then_read_body();
  void read_body();
  void on_body(error_code ec);
  // The sync call (session_sync.cpp).
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
  bool bulk_ = false;  // POST /v1/jobs:bulk: many async jobs, no handler of its own
  // POST /v1/jobs/{id}/signals/{name}: the job and the signal, its payload the body.
  std::optional<std::pair<std::string, std::string>> signal_;

  bool req_keep_alive_ = true;
  bool req_head_ = false;
  bool req_http10_ = false;  // no chunked encoding: a stream's body ends with the connection
  phase phase_ = phase::waiting;
  bool watching_ = false;
  bool writing_ = false;
  bool close_after_ = false;
};

}  // namespace hourglass::server::detail
