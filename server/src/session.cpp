#include "session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <utility>

#include "async_endpoints.hpp"
#include "hourglass/metrics.hpp"
#include "hourglass/support/url.hpp"
#include "request_rules.hpp"
#include "stream_output.hpp"

namespace hourglass::server::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t header_limit = 8 * 1024;  // 431 above this
constexpr std::size_t watch_limit = 64 * 1024;  // pipelined bytes buffered while a job runs
constexpr auto answer_grace = 100ms;            // a running handler's time to stop after its deadline

bool is_http_error(const boost::system::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

// An outcome delivered on this thread while it is still inside submit (a job
// it ran itself, run_inline, or one the queue refused): handed back to
// submit_sync rather than posted to the strand it is already on.
struct outcome_in_submit {
  const void* call;
  std::optional<job_result<handler_result>> result;
};
thread_local outcome_in_submit* submitting = nullptr;

class submitting_scope {  // sets `submitting` for one submit, restored even if it throws
 public:
  explicit submitting_scope(outcome_in_submit& here) : outer_(std::exchange(submitting, &here)) {}
  ~submitting_scope() { submitting = outer_; }
  submitting_scope(const submitting_scope&) = delete;
  submitting_scope& operator=(const submitting_scope&) = delete;

 private:
  outcome_in_submit* outer_;
};

}  // namespace

session::session(core& c, net::ip::tcp::socket socket)
    : core_(c),
      registry_(c.connections),
      stream_(std::move(socket)),
      strand_(stream_.get_executor()),
      io_timer_(strand_, [this] { on_io_timeout(); }),
      deadline_timer_(c.clk, strand_) {
  error_code ec;
  const auto peer = stream_.remote_endpoint(ec);
  if (!ec) {
    remote_ = support::endpoint_string(peer);
  }
}

session::~session() { registry_->remove(this); }

void session::start() {
  io_timer_.guard(weak_from_this());
  net::dispatch(strand_, [self = shared_from_this()] { self->read_request(); });
}

void session::close_when_idle() {
  net::post(strand_, [self = shared_from_this()] {
    if (self->phase_ == phase::waiting || self->phase_ == phase::headers) {
      self->do_close();
    } else {
      self->close_after_ = true;
    }
  });
}

// ---- reading a request ----------------------------------------------------

void session::read_request() {
  phase_ = phase::waiting;
  call_.reset();
  entry_ = nullptr;
  req_keep_alive_ = true;
  req_head_ = false;
  req_http10_ = false;
  header_parser_.reset();
  body_parser_.reset();
  if (buffer_.size() > 0) {  // a pipelined request is already here
    read_header();
    return;
  }
  // Idle keep-alive wait for the first byte; the header timeout starts after it.
  io_timer_.expires_after(core_.opts.idle_timeout);
  stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](error_code ec, std::size_t n) {
    if (ec) {
      self->do_close();
      return;
    }
    self->buffer_.commit(n);
    self->read_header();
  });
}

void session::read_header() {
  phase_ = phase::headers;
  header_parser_.emplace();
  header_parser_->header_limit(header_limit);
  // No body limit while reading headers: Beast's default (1 MiB) would refuse
  // a larger Content-Length as a parse error (400) before start_job can answer
  // 413 for --max-body, or accept it when --max-body is larger. The body
  // parser gets --max-body (read_body).
  header_parser_->body_limit(boost::none);
  io_timer_.expires_after(core_.opts.header_timeout);
  http::async_read_header(stream_, buffer_, *header_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
}

void session::on_header(error_code ec) {
  ec = seen(ec);
  if (ec == http::error::header_limit) {
    req_keep_alive_ = false;
    send_error(431, "headers_too_large", "request headers exceed 8 KiB");
    return;
  }
  if (ec == beast::error::timeout) {
    core_.log->debug("connection closed: headers not received within {} ms", to_millis(core_.opts.header_timeout));
    do_close();
    return;
  }
  if (ec == http::error::end_of_stream || (ec && !is_http_error(ec))) {
    do_close();
    return;
  }
  if (ec) {
    req_keep_alive_ = false;
    send_error(400, "bad_request", "malformed HTTP request");
    return;
  }
  headers_at_ = core_.clk.now();
  const auto& req = header_parser_->get();
  switch (judge_framing(req)) {
    case framing::ok: break;
    case framing::ambiguous:
      req_keep_alive_ = false;
      return send_error(400, "bad_request", "ambiguous message framing (Content-Length, Transfer-Encoding)");
    case framing::unsupported:
      req_keep_alive_ = false;
      return send_error(501, "not_implemented", "transfer coding other than chunked");
  }
  req_keep_alive_ = req.keep_alive();
  req_head_ = req.method() == http::verb::head;
  req_http10_ = req.version() < 11;
  route();
}

bool session::authorized() const {
  return bearer_authorized(header_parser_->get()[http::field::authorization], core_.token);
}

bool session::body_unread() const { return header_parser_ && !header_parser_->is_done(); }

void session::route() {
  const auto& req = header_parser_->get();
  const detail::route r = route_request(req.method(), req.target());
  if (r.needs_auth && !authorized()) {
    response res = error_response(401, "unauthorized", "missing or wrong bearer token");
    res.set(http::field::www_authenticate, "Bearer");
    return send(std::move(res));
  }
  switch (r.kind) {
    case route_kind::healthz: return send(make_response(200, "ok\n", "text/plain; charset=utf-8"));
    case route_kind::readyz: {
      const bool ready = !core_.draining.load();
      return send(make_response(ready ? 200 : 503, ready ? "ready\n" : "draining\n", "text/plain; charset=utf-8"));
    }
    case route_kind::metrics:
      return send(make_response(200, core_.metrics_page(), "text/plain; version=0.0.4; charset=utf-8"));
    case route_kind::submit_job: return start_job(r.name);
    case route_kind::get_job:
    case route_kind::cancel_job:
      phase_ = phase::job;
      return core_.async->lookup(std::string(r.name), r.kind == route_kind::cancel_job, answer_later());
    case route_kind::method_not_allowed: {
      response res = error_response(405, "method_not_allowed", "method not allowed on this path");
      res.set(http::field::allow, r.allow);
      return send(std::move(res));
    }
    case route_kind::not_found: break;
  }
  send_error(404, "not_found", "no such resource");
}

void session::start_job(std::string_view name) {
  const auto& req = header_parser_->get();
  entry_ = core_.find_handler(name);
  // The budget: the tightest of the three headers, refused whole if any is malformed.
  const budget_reading budget = read_budget(req, {core_.opts.default_budget, core_.opts.max_budget});
  async_ = budget.async;
  budget_ = budget.budget;
  freshness_ = budget.freshness;
  idle_limit_ = budget.idle_limit;
  job_request_facts facts;
  facts.handler_known = entry_ != nullptr;
  if (const auto len = header_parser_->content_length()) facts.content_length = *len;
  facts.max_body = core_.opts.max_body;
  facts.budget_ok = budget.ok;
  facts.draining = core_.draining.load();
  facts.expects_continue = beast::iequals(req[http::field::expect], "100-continue");
  facts.body_complete = header_parser_->is_done();

  switch (gate_job_request(facts)) {
    case job_gate::unknown_handler: return send_error(404, "not_found", "no such handler");
    case job_gate::body_too_large: return send_error(413, "payload_too_large", "request body exceeds --max-body");
    case job_gate::invalid_budget: {
      const status st = status::invalid();
      core_.jobs->stats().on_refused(*entry_->metrics, st);
      job_report rep{entry_->name, async_ ? "async" : "sync", duration::max(), {}, st, 400};
      rep.note = "invalid_timeout";
      core_.log_job(rep);
      return send(invalid_budget_response(budget.message));
    }
    case job_gate::shutting_down: {
      core_.jobs->stats().on_rejected(*entry_->metrics, reject_reason::shutting_down);
      const status st = status::rejected(reject_reason::shutting_down);
      core_.log_job({entry_->name, async_ ? "async" : "sync", budget_, {}, st, 503});
      return send(job_response(st, {}, budget_, budget_, nullptr, nullptr));  // nothing of it spent
    }
    case job_gate::continue_then_read_body: {
      static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
      writing_ = true;
      io_timer_.expires_after(core_.opts.body_timeout);
      net::async_write(stream_, net::buffer(go_on.data(), go_on.size()),
                       [self = shared_from_this()](error_code ec, std::size_t) {
                         self->writing_ = false;
                         if (ec) return self->do_close();
                         self->read_body();
                       });
      return;
    }
    case job_gate::read_body: return read_body();
  }
}

void session::read_body() {
  phase_ = phase::body;
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(core_.opts.max_body);
  io_timer_.expires_after(core_.opts.body_timeout);
  http::async_read(stream_, buffer_, *body_parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void session::on_body(error_code ec) {
  ec = seen(ec);
  if (ec == http::error::body_limit) {
    req_keep_alive_ = false;
    return send_error(413, "payload_too_large", "request body exceeds --max-body");
  }
  if (ec && is_http_error(ec) && ec != http::error::partial_message) {  // a malformed chunk, say
    req_keep_alive_ = false;
    core_.log->info("400 malformed request body: {}", ec.message());
    return send_error(400, "bad_request", "malformed request body");
  }
  if (ec) {  // timeout or disconnect mid-body: nobody to answer
    if (ec == beast::error::timeout) core_.log->debug("connection closed: body not received in time");
    return do_close();
  }
  auto in = std::make_shared<job_input>();
  in->msg = body_parser_->release();
  body_parser_.reset();
  in->entry = entry_;
  in->async = async_;
  in->remote = remote_;
  in->budget = async_ ? entry_->run_limit : budget_;
  in->idle_limit = std::min(entry_->idle_limit, idle_limit_);
  if (async_) {
    phase_ = phase::job;
    return core_.async->submit(std::move(in), headers_at_, freshness_, answer_later());
  }
  submit_sync(std::move(in));
}

// ---- sync jobs ---------------------------------------------------------------

void session::submit_sync(std::shared_ptr<job_input> in) {
  phase_ = phase::job;
  auto call = std::make_shared<sync_call>();
  call->entry = entry_;
  call->budget = budget_;
  call->deadline = saturating_add(headers_at_, budget_);  // the budget started when the headers arrived
  if (entry_->stream) call->out = std::make_shared<output_channel>();
  call_ = call;
  io_timer_.expires_never();

  job_options o;
  o.metrics = entry_->metrics;
  o.deadline = call->deadline;
  o.min_budget = entry_->min_budget;
  o.idle_limit = in->idle_limit;
  // Told of the first bytes before the job can write them: the strand hears
  // of them before it hears of the outcome.
  if (call->out) notify_when_readable(call);
  o.run_here_when_idle = entry_->run_inline && !call->out;
  call->submitted_at = core_.clk.now();
  outcome_in_submit here{call.get(), std::nullopt};
  {
    const submitting_scope in_submit(here);
    call->ref = core_.jobs->submit(
        o,
        [in, call](const context& ctx) -> handler_result {
          auto expected = job_phase::queued;
          // The client was already answered at the deadline: never run.
          if (!call->phase.compare_exchange_strong(expected, job_phase::running)) {
            throw stopped_error(status::expired(expiry_stage::queue));
          }
          struct shown {
            sync_call& c;
            shown(sync_call& call, const context& ctx) : c(call) {
              std::lock_guard lock(c.running_mu);
              c.running = &ctx;
              c.started_at = ctx.get_clock().now();
            }
            ~shown() {
              std::lock_guard lock(c.running_mu);
              c.committed_after_run = c.running->committed();
              c.running = nullptr;
            }
          } while_running(*call, ctx);
          if (call->out) {  // a streaming handler: its bytes go out as they come
            channel_output out(ctx, *call->out);
            in->entry->stream(ctx, in->view(), out);
            return handler_result{{}, in->entry->stream_content_type};
          }
          return in->entry->fn(ctx, in->view());
        },
        [self = shared_from_this(), call](job_result<handler_result>&& r) noexcept {
          if (submitting != nullptr && submitting->call == call.get()) {
            submitting->result.emplace(std::move(r));
            return;
          }
          net::post(self->strand_, [self, call, r = std::move(r)]() mutable { self->on_job_done(call, std::move(r)); });
        });
  }
  if (here.result)
    return on_job_done(call, std::move(*here.result));  // no deadline to keep, no disconnect to watch for

  // Answered at the deadline on the clock the executor expires jobs on.
  if (!core_.fifo() && call->deadline != never) {
    deadline_timer_.arm(call->deadline, [self = shared_from_this(), call] { self->on_deadline(call); });
  }
  watch();
}

// While a job waits or runs, keep reading: a disconnect cancels the job.
void session::watch() {
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_watch(ec, n); });
}

void session::on_watch(error_code ec, std::size_t n) {
  ec = seen(ec);
  watching_ = false;
  if (!ec) buffer_.commit(n);
  const bool open_call = phase_ == phase::job && call_ && still_open(call_->state);
  if (open_call) {
    if (!ec) {
      if (buffer_.size() < watch_limit) watch();  // pipelined bytes: keep them for later
      return;
    }
    if (ec == net::error::operation_aborted) return;
    step(call_, sync_event::peer_gone);  // eof or reset: the caller went away
    return;                              // the outcome arrives through on_job_done
  }
  if (ec && ec != net::error::operation_aborted) close_after_ = true;
  maybe_continue();
}

void session::stop_watching() {
  if (!watching_) return;
  error_code ignored;
  stream_.cancel(ignored);
}

void session::on_deadline(const std::shared_ptr<sync_call>& call) {
  if (call != call_ || phase_ == phase::closed) return;
  if (call->state == sync_state::grace || call->state == sync_state::stream_grace) {
    return step(call, sync_event::grace_over);
  }
  auto expected = job_phase::queued;
  // Not started yet: it never will be (the job sees `abandoned` and stops).
  const bool abandoned = call->phase.compare_exchange_strong(expected, job_phase::abandoned);
  step(call, abandoned ? sync_event::deadline_while_queued : sync_event::deadline_while_running);
}

void session::on_job_done(const std::shared_ptr<sync_call>& call, job_result<handler_result>&& r) {
  call->ref = job_ref();  // the job record holds `call` (and this session): break the cycle
  if (phase_ == phase::closed && still_open(call->state)) {
    call->state = sync_state::caller_gone;  // the connection closed under it: nobody to answer
  }
  call->result = std::move(r);
  step(call, sync_event::outcome);
}

// Feeds the call's state machine (request_rules.hpp) and does what it says.
void session::step(const std::shared_ptr<sync_call>& call, sync_event e) {
  const sync_step next = on_sync_event(call->state, e);
  call->state = next.next;
  switch (next.action) {
    case sync_action::none: return;
    case sync_action::cancel_job:
      deadline_timer_.cancel();
      call->ref.cancel(cancel_cause::caller_gone);
      // After the cancel: a write woken by the close then finds its context stopped.
      if (call->out) call->out->close();
      return;
    case sync_action::start_stream: return begin_stream(call, true);
    case sync_action::end_stream_expired: {  // a handler that ignores its context: the stream ends without it
      call->early_status = 200;
      return end_stream(call, status::expired(expiry_stage::run), call->timings_so_far(core_.clk.now()));
    }
    case sync_action::arm_grace:  // running: its context has fired; give the handler a moment to stop
      deadline_timer_.arm(saturating_add(core_.clk.now(), answer_grace),
                          [self = shared_from_this(), call] { self->on_deadline(call); });
      return;
    case sync_action::answer_expired_queue:
    case sync_action::answer_expired_run: {
      const status st = status::expired(next.action == sync_action::answer_expired_queue ? expiry_stage::queue
                                                                                         : expiry_stage::run);
      call->early_status = 504;
      stop_watching();
      const job_timings t = call->timings_so_far(core_.clk.now());
      return send(job_response(st, t, call->budget, duration::zero(), nullptr, nullptr));
    }
    case sync_action::answer_outcome:
    case sync_action::log_outcome:
    case sync_action::log_caller_gone:
    case sync_action::end_stream: break;
  }
  // The outcome is in.
  job_result<handler_result>& r = *call->result;
  // Only an error has one (its default strings are an allocation per request).
  std::optional<error_info> err;
  if (r.st.code == outcome::error) err = describe_error(r.error);
  job_report rep{call->entry->name, "sync", call->budget, r.timings, r.st, 0};
  if (err) rep.note = err->detail;
  if (next.action == sync_action::log_outcome) {  // answered at the deadline already
    rep.http_status = call->early_status;
    core_.log_job(rep);
    return;
  }
  deadline_timer_.cancel();
  // A stream that began ends with trailers; one that wrote nothing and ended
  // ok is still a stream (its trailers say ok); else it answers as any job.
  if (next.action == sync_action::end_stream ||
      (next.action == sync_action::answer_outcome && call->out && r.st.is_ok())) {
    rep.http_status = 200;
    core_.log_job(rep);
    if (!call->stream_started) begin_stream(call, false);
    return end_stream(call, r.st, r.timings);
  }
  stop_watching();
  if (next.action == sync_action::log_caller_gone) {
    rep.http_status = 499;
    core_.log_job(rep);
    close_after_ = true;
    return maybe_continue();
  }
  const duration left = remaining(call->deadline, core_.clk.now());
  response res = job_response(r.st, r.timings, call->budget, left, r.result ? &*r.result : nullptr,
                              err ? &*err : nullptr);
  rep.http_status = res.result_int();
  core_.log_job(rep);
  send(std::move(res));
}

// ---- writing -------------------------------------------------------------------

void session::send_error(unsigned status, std::string_view code, std::string_view message) {
  send(error_response(status, code, message));
}

// A reply that may come from another thread (the fleet's broker calls): sent on the strand.
std::function<void(response)> session::answer_later() {
  io_timer_.expires_after(core_.opts.body_timeout);
  return [self = shared_from_this()](response res) {
    net::post(self->strand_, [self, res = std::move(res)]() mutable { self->send(std::move(res)); });
  };
}

void session::send(response res) {
  if (phase_ == phase::closed) return;
  const bool keep = req_keep_alive_ && !close_after_ && !body_unread() && !core_.draining.load();
  res.keep_alive(keep);
  if (!keep) close_after_ = true;
  if (req_head_) {
    const auto n = res.body().size();
    res.body().clear();
    res.content_length(n);
  }
  res_ = std::move(res);
  head_.clear();  // its capacity stays: the next response reuses it
  append_head(head_, res_);
  writing_ = true;
  io_timer_.expires_after(core_.opts.body_timeout);
  const std::array<net::const_buffer, 2> bytes{net::buffer(head_), net::buffer(res_.body())};
  net::async_write(stream_, bytes, [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
}

void session::on_write(error_code ec) {
  writing_ = false;
  if (ec) close_after_ = true;
  maybe_continue();
}

void session::maybe_continue() {
  if (watching_ || writing_ || phase_ == phase::closed) return;
  if (close_after_) return do_close();
  read_request();
}

void session::do_close() {
  if (phase_ == phase::closed) return;
  phase_ = phase::closed;
  deadline_timer_.cancel();
  error_code ignored;
  stream_.shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close(ignored);
  io_timer_.cancel();
}

// As Beast's basic_stream does on a timeout: the socket closes, and the
// operations it interrupts report the timeout (seen).
void session::on_io_timeout() {
  if (phase_ == phase::closed) return;
  timed_out_ = true;
  error_code ignored;
  stream_.close(ignored);
}

boost::system::error_code session::seen(error_code ec) const { return ec && timed_out_ ? beast::error::timeout : ec; }

}  // namespace hourglass::server::detail
