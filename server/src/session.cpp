#include "session.hpp"

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_to_string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include <algorithm>
#include <cctype>

#include "hourglass/budget_codec.hpp"
#include "hourglass/metrics.hpp"
#include "hourglass/support/url.hpp"
#include "hourglass/utf8.hpp"

namespace hourglass::server::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t header_limit = 8 * 1024;      // 431 above this
constexpr std::size_t watch_limit = 64 * 1024;      // pipelined bytes buffered while a job runs
constexpr auto answer_grace = 100ms;                // a running handler's time to stop after its deadline
constexpr std::string_view jobs_prefix = "/v1/jobs/";
constexpr std::string_view job_freshness_header = "Job-Freshness";

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Compares in time that depends on the lengths only, never on where the bytes differ.
bool constant_time_equal(std::string_view given, std::string_view expected) noexcept {
  unsigned diff = given.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0u;
    diff |= g ^ static_cast<unsigned char>(expected[i]);
  }
  return diff == 0;
}

// Prefer: respond-async (RFC 7240), among other preferences.
bool prefers_async(std::string_view prefer) noexcept {
  while (!prefer.empty()) {
    const auto comma = prefer.find(',');
    std::string_view item = trim(prefer.substr(0, comma));
    item = trim(item.substr(0, item.find_first_of(";=")));
    if (iequals(item, "respond-async")) return true;
    if (comma == std::string_view::npos) break;
    prefer.remove_prefix(comma + 1);
  }
  return false;
}

// A header that must appear at most once: nullopt when absent; `dup` when repeated.
template <class Fields>
std::optional<std::string_view> single_header(const Fields& f, std::string_view name, bool& dup) {
  const auto n = f.count(name);
  if (n == 0) return std::nullopt;
  if (n > 1) dup = true;
  return std::string_view(f[name]);
}

bool is_http_error(const boost::system::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_target).category();
}

}  // namespace

struct session::job_input {
  http::request<http::string_body> msg;
  const handler_entry* entry = nullptr;
  duration budget{};
  bool async = false;
  std::string remote;

  request_view view() const {
    request_view v;
    v.handler = entry->name;
    v.body = msg.body();
    v.content_type = msg[http::field::content_type];
    v.traceparent = msg["traceparent"];
    v.remote = remote;
    v.budget = budget;
    v.async = async;
    v.header_lookup = [this](std::string_view name) -> std::string_view { return msg[name]; };
    return v;
  }
};

session::session(core& c, net::ip::tcp::socket socket)
    : core_(c),
      registry_(c.connections),
      stream_(std::move(socket)),
      strand_(stream_.get_executor()),
      deadline_timer_(stream_.get_executor()) {
  error_code ec;
  const auto peer = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
  if (!ec) {
    remote_ = support::endpoint_string(peer);
  }
}

session::~session() { registry_->remove(this); }

void session::start() {
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
  header_parser_.reset();
  body_parser_.reset();
  if (buffer_.size() > 0) {  // a pipelined request is already here
    read_header();
    return;
  }
  // Idle keep-alive wait for the first byte; the header timeout starts after it.
  stream_.expires_after(core_.opts.idle_timeout);
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
  stream_.expires_after(core_.opts.header_timeout);
  http::async_read_header(stream_, buffer_, *header_parser_,
                          [self = shared_from_this()](error_code ec, std::size_t) { self->on_header(ec); });
}

void session::on_header(error_code ec) {
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
  headers_at_ = core_.jobs->get_clock().now();
  const auto& req = header_parser_->get();
  req_keep_alive_ = req.keep_alive();
  req_head_ = req.method() == http::verb::head;
  route();
}

bool session::authorized() const {
  if (core_.token.empty()) return true;
  const std::string_view auth = header_parser_->get()[http::field::authorization];
  constexpr std::string_view scheme = "Bearer ";
  if (auth.size() < scheme.size() || !iequals(auth.substr(0, scheme.size()), scheme)) return false;
  return constant_time_equal(trim(auth.substr(scheme.size())), core_.token);
}

bool session::body_unread() const { return header_parser_ && !header_parser_->is_done(); }

void session::route() {
  const auto& req = header_parser_->get();
  const std::string_view target = req.target();
  const std::string_view path = target.substr(0, target.find('?'));
  const http::verb m = req.method();
  const bool get_like = m == http::verb::get || m == http::verb::head;
  const auto not_allowed = [&](std::string_view allow) {
    response res = error_response(405, "method_not_allowed", "method not allowed on this path");
    res.set(http::field::allow, allow);
    send(std::move(res));
  };

  if (path == "/healthz") {
    if (!get_like) return not_allowed("GET, HEAD");
    return send(make_response(200, "ok\n", "text/plain; charset=utf-8"));
  }
  if (!authorized()) {
    response res = error_response(401, "unauthorized", "missing or wrong bearer token");
    res.set(http::field::www_authenticate, "Bearer");
    return send(std::move(res));
  }
  if (path == "/readyz") {
    if (!get_like) return not_allowed("GET, HEAD");
    const bool ready = !core_.draining.load();
    return send(make_response(ready ? 200 : 503, ready ? "ready\n" : "draining\n", "text/plain; charset=utf-8"));
  }
  if (path == "/metrics") {
    if (!get_like) return not_allowed("GET, HEAD");
    return send(make_response(200, render_prometheus(core_.jobs->stats().snapshot()),
                              "text/plain; version=0.0.4; charset=utf-8"));
  }
  if (path.substr(0, jobs_prefix.size()) == jobs_prefix) {
    const std::string_view rest = path.substr(jobs_prefix.size());
    if (rest.empty() || rest.find('/') != std::string_view::npos) {
      return send_error(404, "not_found", "no such resource");
    }
    switch (m) {
      case http::verb::post: return start_job(rest);
      case http::verb::get: return get_async(rest, false);
      case http::verb::delete_: return get_async(rest, true);
      default: return not_allowed("GET, POST, DELETE");
    }
  }
  send_error(404, "not_found", "no such resource");
}

void session::start_job(std::string_view name) {
  const auto& req = header_parser_->get();
  entry_ = core_.find_handler(name);
  if (entry_ == nullptr) return send_error(404, "not_found", "no such handler");
  if (const auto len = header_parser_->content_length(); len && *len > core_.opts.max_body) {
    return send_error(413, "payload_too_large", "request body exceeds --max-body");
  }

  // The budget: the tightest of the three headers, refused whole if any is malformed.
  bool dup = false;
  budget_headers h;
  h.request_timeout = single_header(req, request_timeout_header, dup);
  h.grpc_timeout = single_header(req, grpc_timeout_header, dup);
  h.envoy_timeout_ms = single_header(req, envoy_timeout_ms_header, dup);
  const header_budget stated = tightest_budget(h);
  async_ = prefers_async(req[http::field::prefer]);
  std::optional<duration> freshness;
  bool bad_freshness = false;
  if (async_) {
    if (const auto f = single_header(req, job_freshness_header, dup)) {
      freshness = parse_grpc_timeout(*f);
      bad_freshness = !freshness.has_value();
    }
  }
  if (dup || stated.state == header_budget::kind::invalid || bad_freshness) {
    core_.jobs->stats().on_invalid_timeout(*entry_->metrics);
    std::string_view which = dup ? "a budget header appears more than once" : "";
    std::string msg;
    if (!dup) msg = "malformed " + std::string(bad_freshness ? job_freshness_header : stated.bad_header) + " header";
    job_report rep{entry_->name, async_ ? "async" : "sync", duration::max(), {}, status::rejected(reject_reason::none), 400};
    rep.note = "invalid_timeout";
    core_.log_job(rep);
    support::json_object o;
    o.add("error", "invalid_timeout").add("outcome", "rejected").add("message", dup ? which : std::string_view(msg));
    response res = make_response(400, o.str(), json_type);
    res.set("Server-Timing", server_timing({}));
    return send(std::move(res));
  }
  budget_ = effective_budget(stated, core_.opts.default_budget, core_.opts.max_budget);
  freshness_ = std::min(freshness.value_or(core_.opts.default_budget), core_.opts.max_budget);

  if (core_.draining.load()) {
    core_.jobs->stats().on_rejected(*entry_->metrics, reject_reason::shutting_down);
    const status st = status::rejected(reject_reason::shutting_down);
    core_.log_job({entry_->name, async_ ? "async" : "sync", budget_, {}, st, 503});
    return send(job_response(st, {}, budget_, remaining(saturating_add(headers_at_, budget_), headers_at_), nullptr,
                             nullptr));
  }

  if (iequals(req[http::field::expect], "100-continue") && !header_parser_->is_done()) {
    static constexpr std::string_view go_on = "HTTP/1.1 100 Continue\r\n\r\n";
    writing_ = true;
    stream_.expires_after(core_.opts.body_timeout);
    net::async_write(stream_, net::buffer(go_on.data(), go_on.size()),
                     [self = shared_from_this()](error_code ec, std::size_t) {
                       self->writing_ = false;
                       if (ec) return self->do_close();
                       self->read_body();
                     });
    return;
  }
  read_body();
}

void session::read_body() {
  phase_ = phase::body;
  body_parser_.emplace(std::move(*header_parser_));
  header_parser_.reset();
  body_parser_->body_limit(core_.opts.max_body);
  stream_.expires_after(core_.opts.body_timeout);
  http::async_read(stream_, buffer_, *body_parser_,
                   [self = shared_from_this()](error_code ec, std::size_t) { self->on_body(ec); });
}

void session::on_body(error_code ec) {
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
  if (async_) {
    submit_async(std::move(in));
  } else {
    submit_sync(std::move(in));
  }
}

// ---- sync jobs ---------------------------------------------------------------

void session::submit_sync(std::shared_ptr<job_input> in) {
  phase_ = phase::job;
  auto call = std::make_shared<sync_call>();
  call->entry = entry_;
  call->budget = budget_;
  call->deadline = saturating_add(headers_at_, budget_);  // the budget started when the headers arrived
  call_ = call;
  stream_.expires_never();

  job_options o;
  o.metrics = entry_->metrics;
  o.deadline = call->deadline;
  o.min_budget = entry_->min_budget;
  call->submitted_at = core_.jobs->get_clock().now();
  call->ref = core_.jobs->submit(
      o,
      [in, call](const context& ctx) -> handler_result {
        auto expected = job_phase::queued;
        // The client was already answered at the deadline: never run.
        if (!call->phase.compare_exchange_strong(expected, job_phase::running)) {
          throw stopped_error(status::expired(expiry_stage::queue));
        }
        return in->entry->fn(ctx, in->view());
      },
      [self = shared_from_this(), call](job_result<handler_result>&& r) noexcept {
        net::post(self->strand_, [self, call, r = std::move(r)]() mutable { self->on_job_done(call, std::move(r)); });
      });

  if (!core_.fifo() && call->deadline != never) {
    deadline_timer_.expires_at(saturating_add(call->deadline, 1ms));
    deadline_timer_.async_wait([self = shared_from_this(), call](error_code e) { self->on_deadline(call, e); });
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
  watching_ = false;
  if (!ec) buffer_.commit(n);
  if (phase_ == phase::job && call_ && !call_->answered && !call_->peer_gone) {
    if (!ec) {
      if (buffer_.size() < watch_limit) watch();  // pipelined bytes: keep them for later
      return;
    }
    if (ec == net::error::operation_aborted) return;
    call_->peer_gone = true;  // eof or reset: the caller went away
    deadline_timer_.cancel();
    call_->ref.cancel(cancel_cause::caller_gone);
    return;  // the outcome arrives through on_job_done
  }
  if (ec && ec != net::error::operation_aborted) close_after_ = true;
  maybe_continue();
}

void session::stop_watching() {
  if (!watching_) return;
  error_code ignored;
  beast::get_lowest_layer(stream_).socket().cancel(ignored);
}

void session::on_deadline(const std::shared_ptr<sync_call>& call, error_code ec) {
  if (ec || call != call_ || call->answered || call->peer_gone || phase_ == phase::closed) return;
  auto expected = job_phase::queued;
  status st;
  if (call->phase.compare_exchange_strong(expected, job_phase::abandoned)) {
    st = status::expired(expiry_stage::queue);  // it will be dropped at dequeue, never run
  } else if (!call->grace) {
    call->grace = true;  // running: its context has fired; give the handler a moment to stop
    deadline_timer_.expires_after(answer_grace);
    deadline_timer_.async_wait([self = shared_from_this(), call](error_code e) { self->on_deadline(call, e); });
    return;
  } else {
    st = status::expired(expiry_stage::run);  // a handler that ignores its context: answer anyway
  }
  call->answered = true;
  call->early_status = 504;
  stop_watching();
  const time_point now = core_.jobs->get_clock().now();
  job_timings t;
  t.budget = call->budget;
  t.queue_delay = elapsed(call->submitted_at, now);
  response res = job_response(st, t, call->budget, duration::zero(), nullptr, nullptr);
  send(std::move(res));
}

void session::on_job_done(const std::shared_ptr<sync_call>& call, job_result<handler_result>&& r) {
  call->ref = job_ref();  // the job record holds `call` (and this session): break the cycle
  const error_info err = r.st.code == outcome::error ? describe_error(r.error) : error_info{};
  job_report rep{call->entry->name, "sync", call->budget, r.timings, r.st, 0};
  if (r.st.code == outcome::error) rep.note = err.detail;
  if (call != call_ || call->answered) {  // answered at the deadline already
    rep.http_status = call->early_status;
    core_.log_job(rep);
    return;
  }
  call->answered = true;
  deadline_timer_.cancel();
  stop_watching();
  if (call->peer_gone || phase_ == phase::closed) {
    rep.http_status = 499;
    core_.log_job(rep);
    close_after_ = true;
    return maybe_continue();
  }
  const duration left = remaining(call->deadline, core_.jobs->get_clock().now());
  response res = job_response(r.st, r.timings, call->budget, left, r.result ? &*r.result : nullptr, &err);
  rep.http_status = res.result_int();
  core_.log_job(rep);
  send(std::move(res));
}

// ---- async jobs --------------------------------------------------------------

void session::submit_async(std::shared_ptr<job_input> in) {
  phase_ = phase::job;
  const time_point now = core_.jobs->get_clock().now();
  auto job = core_.async_jobs.create(entry_->name, now);
  if (!job) {
    core_.jobs->stats().on_rejected(*entry_->metrics, reject_reason::queue_full);
    const status st = status::rejected(reject_reason::queue_full);
    core_.log_job({entry_->name, "async", duration::max(), {}, st, 503, "async job store full"});
    return send(job_response(st, {}, duration::max(), duration::max(), nullptr, nullptr));
  }

  job_options o;
  o.metrics = entry_->metrics;
  o.start_by = saturating_add(headers_at_, freshness_);
  o.run_limit = entry_->run_limit;
  core* c = &core_;
  job_ref ref = core_.jobs->submit(
      o,
      // The job keeps its record alive (job->ref); the record sees the job weakly,
      // so a job dropped from the store is freed.
      [in, weak = std::weak_ptr<async_job>(job)](const context& ctx) -> handler_result {
        if (auto job = weak.lock()) {
          auto expected = job_phase::queued;
          job->phase.compare_exchange_strong(expected, job_phase::running);
        }
        return in->entry->fn(ctx, in->view());
      },
      [c, weak = std::weak_ptr<async_job>(job), e = entry_](job_result<handler_result>&& r) noexcept {
        const error_info err = r.st.code == outcome::error ? describe_error(r.error) : error_info{};
        job_report rep{e->name, "async", duration::max(), r.timings, r.st, 0};
        if (r.st.code == outcome::error) rep.note = err.detail;
        c->log_job(rep);
        const auto job = weak.lock();
        if (!job) return;  // evicted from the store meanwhile
        const time_point at = c->jobs->get_clock().now();
        {
          std::lock_guard lock(job->mu);
          job->finished = true;
          job->st = r.st;
          job->timings = r.timings;
          job->finished_at = at;
          if (r.result) job->result = std::move(*r.result);
          if (r.st.code == outcome::error) {
            job->error_http = err.http_status;
            job->error_code = err.code;
            job->error_message = err.message;
          }
        }
        c->async_jobs.finished(*job, at);
      });

  bool cancel_now = false;
  bool refused = false;
  status st;
  {
    std::lock_guard lock(job->mu);
    job->ref = ref;
    job->submitted = true;
    cancel_now = job->cancel_requested && !job->finished;
    refused = job->finished && (job->st.code == outcome::rejected ||
                                (job->st.code == outcome::deadline_exceeded && job->st.stage == expiry_stage::admission));
    st = job->st;
  }
  if (cancel_now) ref.cancel(cancel_cause::requested);
  if (refused) {  // refused at admission: no job to poll
    core_.async_jobs.remove(job->id);
    return send(job_response(st, {}, duration::max(), duration::max(), nullptr, nullptr));
  }
  const std::string location = std::string(jobs_prefix) + job->id;
  support::json_object body;
  body.add("id", job->id).add("state", "queued").add("location", location);
  response res = make_response(202, body.str(), json_type);
  res.set(http::field::location, location);
  res.set("Server-Timing", server_timing({}));  // nothing spent yet; GET reports the job's own
  send(std::move(res));
}

void session::get_async(std::string_view id, bool cancel) {
  const time_point now = core_.jobs->get_clock().now();
  auto job = core_.async_jobs.find(id, now);
  if (!job) return send_error(404, "not_found", "no such job (unknown, or expired)");
  if (cancel) {
    job_ref ref;
    bool go = false;
    {
      std::lock_guard lock(job->mu);
      if (!job->finished) {
        job->cancel_requested = true;
        go = job->submitted;
        ref = job->ref;
      }
    }
    if (go) ref.cancel(cancel_cause::requested);  // outside the lock: a queued job completes right here
  }

  support::json_object o;
  response res;
  {
    std::lock_guard lock(job->mu);
    o.add("id", job->id).add("handler", job->handler);
    if (!job->finished) {
      o.add("state", job->phase.load() == job_phase::running ? "running" : "queued");
      if (job->cancel_requested) o.add("cancel_requested", true);
      o.add("age_ms", to_millis(elapsed(job->created, now)));
    } else {
      const status& st = job->st;
      o.add("state", to_string(st.code));
      if (st.code == outcome::deadline_exceeded) o.add("stage", to_string(st.stage));
      if (st.code == outcome::cancelled) o.add("cause", to_string(st.cause));
      if (st.code == outcome::error) {
        o.add("error", job->error_code).add("message", job->error_message).add("http_status", job->error_http);
      }
      o.add("queued_ms", to_millis(job->timings.queue_delay));
      if (job->timings.ran) o.add("run_ms", to_millis(job->timings.run_time));
      o.add("age_ms", to_millis(elapsed(job->created, now)));
      if (st.is_ok()) {
        o.add("content_type", job->result.content_type);
        if (valid_utf8(job->result.body)) {
          o.add("result", job->result.body);
        } else {
          o.add("result_base64", support::base64(job->result.body));
        }
      }
    }
    res = make_response(cancel && !job->finished ? 202 : 200, o.str(), json_type);
    if (job->finished) res.set("Server-Timing", server_timing(job->timings));
  }
  res.set(http::field::cache_control, "no-store");
  send(std::move(res));
}

// ---- writing -------------------------------------------------------------------

void session::send_error(unsigned status, std::string_view code, std::string_view message) {
  send(error_response(status, code, message));
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
  writing_ = true;
  stream_.expires_after(core_.opts.body_timeout);
  http::async_write(stream_, res_, [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); });
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
  beast::get_lowest_layer(stream_).socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  stream_.close();
}

}  // namespace hourglass::server::detail
