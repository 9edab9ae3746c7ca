// A sync job's streamed response (docs/reference/http-api.md, "Trailers"): the
// handler writes into the call's output_channel on its worker; here, on the
// connection's strand, the bytes go out as HTTP/1.1 chunks, and the stream
// ends with trailers saying how the job ended. One write at a time: the
// channel fills while the socket is slow, and that holds the handler back.
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>

#include "hourglass/metrics.hpp"
#include "http/session.hpp"

namespace hourglass::server::detail {

namespace net = boost::asio;
namespace http = boost::beast::http;

// Bytes in the channel come to the strand; the callback holds neither the
// session nor the call (they hold the channel).
void session::notify_when_readable(const std::shared_ptr<sync_call>& call) {
  call->out->on_readable([weak = weak_from_this(), strand = strand_, weak_call = std::weak_ptr<sync_call>(call)] {
    net::post(strand, [weak, weak_call] {
      auto self = weak.lock();
      auto c = weak_call.lock();
      if (self && c) self->on_stream_readable(c);
    });
  });
}

void session::on_stream_readable(const std::shared_ptr<sync_call>& call) {
  if (call != call_ || phase_ == phase::closed) return;
  if (call->state == sync_state::waiting) return step(call, sync_event::first_output);
  pump_stream();
}

// The status line goes out with the first bytes (or with the trailers of a
// stream that wrote nothing); `first_output`: bytes are there to send.
void session::begin_stream(const std::shared_ptr<sync_call>& call, bool first_output) {
  call->stream_started = true;
  if (first_output) core_.jobs->stats().on_first_output(elapsed(headers_at_, core_.clk.now()));
  pump_stream();
}

void session::end_stream(const std::shared_ptr<sync_call>& call, const status& st, const job_timings& t) {
  stream_trailers_ = {};
  stream_trailers_.set("Job-Outcome", job_outcome_trailer(st, t.committed));
  stream_trailers_.set("Server-Timing", server_timing(t));
  call->stream_ending = true;
  call->out->close();  // a handler still writing (one that ignores its deadline) is told at once
  pump_stream();
}

// Writes what is due next: the head, the buffered bytes as one chunk, or,
// once the stream is ending and nothing is left, the last chunk with the
// trailers. With nothing to write it waits for the handler's next bytes.
void session::pump_stream() {
  const std::shared_ptr<sync_call> call = call_;
  if (!call || !call->out || !call->stream_started || call->stream_done || writing_ || phase_ == phase::closed) {
    return;
  }
  if (!still_open(call->state) && !call->stream_ending) return;  // the caller went away: nobody to write to
  const auto done = [self = shared_from_this()](error_code ec, std::size_t) { self->on_stream_write(ec); };
  io_timer_.expires_after(core_.opts.write_timeout);  // a reader that stops reading frees the connection
  if (!call->head_sent) {
    call->head_sent = true;
    stream_head_.emplace(http::status::ok, 11);
    stream_head_->set(http::field::server, "hourglassd");
    set_api_safety_headers(*stream_head_);
    stream_head_->set(http::field::content_type, call->entry->stream_content_type);
    // HTTP/1.0 has no chunked encoding (RFC 9112 section 6.1): the body
    // ends with the connection, and without trailers.
    if (!req_http10_) {
      stream_head_->set(http::field::trailer, "Job-Outcome, Server-Timing");
      stream_head_->chunked(true);
    }
    const bool keep = keeps_alive({.requested = req_keep_alive_,
                                   .closing = close_after_,
                                   .draining = core_.draining.load(),
                                   .http10_stream = req_http10_});
    stream_head_->keep_alive(keep);
    if (!keep) close_after_ = true;
    stream_head_writer_.emplace(*stream_head_);
    writing_ = true;
    return http::async_write_header(stream_, *stream_head_writer_, done);
  }
  stream_bytes_ = call->out->take();
  if (!stream_bytes_.empty()) {
    writing_ = true;
    if (req_http10_) return net::async_write(stream_, net::buffer(stream_bytes_), done);
    return net::async_write(stream_, http::make_chunk(net::buffer(stream_bytes_)), done);
  }
  if (call->stream_ending) {
    call->stream_done = true;
    if (req_http10_) {  // closing the connection ends the body
      close_after_ = true;
      stop_watching();
      return maybe_continue();
    }
    writing_ = true;
    return net::async_write(stream_, http::make_chunk_last(stream_trailers_), done);
  }
  // Waiting for the handler, not the reader: its deadline and idle limit bound this.
  io_timer_.expires_never();
  notify_when_readable(call);
}

void session::on_stream_write(error_code ec) {
  writing_ = false;
  if (ec) return on_stream_broken();
  const bool gone = call_ && !still_open(call_->state) && !call_->stream_ending;  // its outcome is in: close
  if (call_ && (call_->stream_done || gone)) {  // the trailers are out, or nobody is left to read
    stop_watching();
    return maybe_continue();
  }
  pump_stream();
}

// A write failed or timed out: the reader is gone. The job, if it still
// runs, is cancelled as for any caller that went away.
void session::on_stream_broken() {
  close_after_ = true;
  const std::shared_ptr<sync_call> call = call_;
  if (call && still_open(call->state)) return step(call, sync_event::peer_gone);  // its outcome closes
  if (call && call->state == sync_state::caller_gone) return;                     // the same, already on its way
  do_close();
}

}  // namespace hourglass::server::detail
