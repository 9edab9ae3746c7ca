#include "http/session.hpp"

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

#include "core/person_wait.hpp"
#include "hourglass/metrics.hpp"
#include "hourglass/support/url.hpp"
#include "http/job_endpoints.hpp"
#include "http/queue_endpoints.hpp"
#include "http/request_rules.hpp"
#include "http/ui_assets.hpp"

namespace hourglass::server::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t header_limit = 8 * 1024;  // 431 above this

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
  bulk_ = false;
  signal_.reset();
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
  const read_error e = sort_read_error(ec);
  switch (const read_verdict v = judge_read(read_phase::headers, e)) {
    case read_verdict::go_on: break;
    case read_verdict::close:
      if (e == read_error::timeout) {
        core_.log->debug("connection closed: headers not received within {} ms", to_millis(core_.opts.header_timeout));
      }
      return do_close();
    default: req_keep_alive_ = false; return send(read_refusal_response(v));
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

bool session::body_unread() const { return header_parser_ && !header_parser_->is_done(); }

void session::route() {
  const auto& req = header_parser_->get();
  const detail::route r = route_request(req.method(), req.target());
  const bool read = req.method() == http::verb::get || req.method() == http::verb::head;
  // Before anything else, /healthz too: a rebound page learns nothing here.
  if (req.count(http::field::host) > 1 || !host_allowed(req[http::field::host], core_.opts.allowed_hosts)) {
    return send_error(421, "misdirected_request",
                      "Host names no address or name this daemon answers to (add it with --allowed-host)");
  }
  if (!read && !same_origin_or_none(req[http::field::origin], req[http::field::host])) {
    return send_error(403, "cross_origin", "a request that changes something must come from this daemon's own pages");
  }
  if (r.needs_admin) {
    if (core_.admin_token.empty()) {
      return send_error(403, "admin_disabled", "admin actions need the daemon to run with --admin-token-file");
    }
    if (!bearer_authorized(req[http::field::authorization], core_.admin_token)) return send(unauthorized_response());
  } else if (r.needs_auth &&
             !request_authorized(req[http::field::authorization], read, core_.token, core_.admin_token)) {
    return send(unauthorized_response());
  }
  switch (r.kind) {
    case route_kind::healthz: return send(make_response(200, "ok\n", "text/plain; charset=utf-8"));
    case route_kind::readyz: {
      const bool ready = !core_.draining.load();
      return send(make_response(ready ? 200 : 503, ready ? "ready\n" : "draining\n", "text/plain; charset=utf-8"));
    }
    case route_kind::metrics:
      return send(make_response(200, core_.metrics_page(), "text/plain; version=0.0.4; charset=utf-8"));
    case route_kind::schedules: {
      response res = make_response(200, core_.schedules->json(), json_type);
      res.set(http::field::cache_control, "no-store");
      return send(std::move(res));
    }
    case route_kind::submit_job: return start_job(r.name);
    case route_kind::submit_bulk: bulk_ = true; return start_job({});
    case route_kind::signal_job: signal_ = {std::string(r.name), std::string(r.item)}; return start_signal();
    case route_kind::list_jobs: phase_ = phase::job; return answer_job_list(core_, req.target(), answer_later());
    case route_kind::list_queues:
    case route_kind::get_queue:
    case route_kind::pause_queue:
    case route_kind::resume_queue:
      phase_ = phase::job;
      return answer_queue(core_, r.name,
                          r.kind == route_kind::pause_queue    ? queue_action::pause
                          : r.kind == route_kind::resume_queue ? queue_action::resume
                                                               : queue_action::look,
                          answer_later());
    case route_kind::replay_job: {
      phase_ = phase::job;
      // A new freshness, from now: Job-Freshness (or Job-Timeout), else the default budget.
      const budget_reading b = read_budget(req, {core_.opts.default_budget, core_.opts.max_budget}, true);
      if (!b.ok) return send(invalid_budget_response(b.message));
      return answer_replay(core_, std::string(r.name), b.freshness, answer_later());
    }
    case route_kind::delete_dead:
      phase_ = phase::job;
      return answer_delete_dead(core_, r.name, std::string(r.item), answer_later());
    case route_kind::purge_dead:
      phase_ = phase::job;
      return answer_purge_dead(core_, r.name, req.target(), answer_later());
    case route_kind::replay_dead_bulk: {
      phase_ = phase::job;
      const budget_reading b = read_budget(req, {core_.opts.default_budget, core_.opts.max_budget}, true);
      if (!b.ok) return send(invalid_budget_response(b.message));
      return answer_replay_dead_bulk(core_, r.name, req.target(), b.freshness, answer_later());
    }
    case route_kind::get_job:
    case route_kind::cancel_job:
      phase_ = phase::job;
      return answer_job_lookup(core_, std::string(r.name), r.kind == route_kind::cancel_job, answer_later());
    case route_kind::ui_redirect: {
      response res = make_response(308, "", "text/plain; charset=utf-8");
      res.set(http::field::location, "/ui/");
      return send(std::move(res));
    }
    case route_kind::ui_asset: return send(ui_response(r.name, req[http::field::if_none_match]));
    case route_kind::method_not_allowed: return send(method_not_allowed_response(r.allow));
    case route_kind::not_found: break;
  }
  send_error(404, "not_found", "no such resource");
}

// A job, or with bulk_ a list of them (each with its handler in the body).
void session::start_job(std::string_view name) {
  const auto& req = header_parser_->get();
  entry_ = bulk_ ? nullptr : core_.find_handler(name);
  // The budget: the tightest of the three headers, refused whole if any is malformed.
  const budget_reading budget = read_budget(req, {core_.opts.default_budget, core_.opts.max_budget}, bulk_);
  async_ = budget.async;
  budget_ = budget.budget;
  freshness_ = budget.freshness;
  idle_limit_ = budget.idle_limit;
  job_request_facts facts;
  facts.handler_known = bulk_ || entry_ != nullptr;
  if (const auto len = header_parser_->content_length()) facts.content_length = *len;
  facts.max_body = core_.opts.max_body;
  facts.budget_ok = budget.ok;
  facts.draining = core_.draining.load();
  facts.expects_continue = iequals(req[http::field::expect], "100-continue");
  facts.body_complete = header_parser_->is_done();

  switch (gate_job_request(facts)) {
    case job_gate::unknown_handler: return send_error(404, "not_found", "no such handler");
    case job_gate::body_too_large: return send_error(413, "payload_too_large", "request body exceeds --max-body");
    case job_gate::invalid_budget:
      if (bulk_) return send(invalid_budget_response(budget.message));  // no handler's series to count it in
      return send(refuse(core_,
                         {*entry_, async_ ? "async" : "sync", status::invalid(), duration::max(), "invalid_timeout"},
                         invalid_budget_response(budget.message)));
    case job_gate::shutting_down: {
      const status st = status::rejected(reject_reason::shutting_down);
      if (bulk_) return send(job_response(st, {}, duration::max(), duration::max(), nullptr, nullptr));
      return send(refuse(core_, {*entry_, async_ ? "async" : "sync", st, budget_},
                         job_response(st, {}, budget_, budget_, nullptr, nullptr)));  // nothing of it spent
    }
    case job_gate::continue_then_read_body: return continue_then_read_body();
    case job_gate::read_body: return read_body();
  }
}

// A person's signal: its payload is the body (at most 64 KiB, within --max-body).
void session::start_signal() {
  const auto& req = header_parser_->get();
  job_request_facts facts;
  facts.handler_known = true;
  if (const auto len = header_parser_->content_length()) facts.content_length = *len;
  facts.max_body = std::min<std::uint64_t>(core_.opts.max_body, max_signal_payload);
  facts.budget_ok = true;
  facts.expects_continue = iequals(req[http::field::expect], "100-continue");
  facts.body_complete = header_parser_->is_done();
  switch (gate_job_request(facts)) {
    case job_gate::body_too_large:
      return send_error(413, "payload_too_large", "a signal's payload is at most 64 KiB (and --max-body)");
    case job_gate::continue_then_read_body: return continue_then_read_body();
    default: return read_body();
  }
}

void session::continue_then_read_body() {
  static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
  writing_ = true;
  io_timer_.expires_after(core_.opts.write_timeout);
  net::async_write(stream_, net::buffer(go_on.data(), go_on.size()),
                   [self = shared_from_this()](error_code ec, std::size_t) {
                     self->writing_ = false;
                     if (ec) return self->do_close();
                     self->read_body();
                   });
}

void session::read_body() {
  phase_ = phase::body;
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(signal_ ? std::min<std::uint64_t>(core_.opts.max_body, max_signal_payload)
                                   : core_.opts.max_body);
  io_timer_.expires_after(core_.opts.body_timeout);
  http::async_read(stream_, buffer_, *body_parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void session::on_body(error_code ec) {
  ec = seen(ec);
  const read_error e = sort_read_error(ec);
  switch (const read_verdict v = judge_read(read_phase::body, e)) {
    case read_verdict::go_on: break;
    case read_verdict::close:  // timeout or disconnect mid-body: nobody to answer
      if (e == read_error::timeout) core_.log->debug("connection closed: body not received in time");
      return do_close();
    default:
      if (v == read_verdict::malformed_body) core_.log->info("400 malformed request body: {}", ec.message());
      req_keep_alive_ = false;
      return send(read_refusal_response(v));
  }
  if (signal_) {
    phase_ = phase::job;
    std::string payload = std::move(body_parser_->release().body());
    body_parser_.reset();
    auto [id, name] = *std::exchange(signal_, std::nullopt);
    return answer_signal(core_, std::move(id), std::move(name), std::move(payload), answer_later());
  }
  if (bulk_) {
    phase_ = phase::job;
    bulk_submission s{body_parser_->release(), headers_at_, freshness_, idle_limit_, remote_};
    body_parser_.reset();
    return submit_bulk_jobs(core_, std::move(s), answer_later());
  }
  http::request<http::string_body> msg = body_parser_->release();
  body_parser_.reset();
  auto in = std::make_shared<job_input>();
  in->body = std::move(msg.body());
  in->entry = entry_;
  in->async = async_;
  in->remote = remote_;
  const job_bounds bounds = bounds_of_job(async_, budget_, entry_->run_limit, entry_->idle_limit, idle_limit_);
  in->budget = bounds.budget;
  in->idle_limit = bounds.idle_limit;
  if (async_) {
    new_job job;
    job.headers_at = headers_at_;
    job.freshness = freshness_;
    if (const std::optional<terms_error> bad = read_job_terms(core_, msg, *entry_, job)) {
      return send(refuse(core_, {*entry_, "async", status::invalid(), duration::max(), bad->error},
                         error_response(400, bad->error, bad->message)));
    }
    read_request_head(*in, std::make_shared<const http::request_header<>>(std::move(msg.base())));
    phase_ = phase::job;
    job.in = std::move(in);
    return submit_async_job(core_, std::move(job), answer_later());
  }
  read_request_head(*in, std::make_shared<const http::request_header<>>(std::move(msg.base())));
  submit_sync(std::move(in));
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
  const bool keep = keeps_alive({.requested = req_keep_alive_,
                                 .closing = close_after_,
                                 .body_unread = body_unread(),
                                 .draining = core_.draining.load()});
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
  io_timer_.expires_after(core_.opts.write_timeout);
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

boost::system::error_code session::seen(error_code ec) const { return read_as_seen(ec, timed_out_); }

}  // namespace hourglass::server::detail
