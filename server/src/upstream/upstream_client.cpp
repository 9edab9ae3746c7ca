#include "hourglass/server/upstream_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <poll.h>

#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <vector>

#include "hourglass/asio_bridge.hpp"
#include "hourglass/budget_codec.hpp"
#include "hourglass/exposition.hpp"
#include "hourglass/fan_out.hpp"
#include "hourglass/retry.hpp"
#include "hourglass/server/handler.hpp"
#include "hourglass/server/options.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"
#include "upstream/call_rules.hpp"

namespace hourglass::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using error_code = boost::system::error_code;

namespace {

// One keep-alive connection. Touched only on its strand while an exchange
// runs; handed between workers through the pool's mutex otherwise.
struct connection {
  explicit connection(net::io_context& io) : stream(net::make_strand(io)) {}
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  time_point idle_since{};  // on the pool's clock
  bool connected = false;
};
using conn_ptr = std::shared_ptr<connection>;

struct exchange_result {
  error_code ec;
  bool too_little_budget = false;
  bool got_some = false;  // some of the answer arrived
  http::response<http::string_body> res;
};

// One request/response on one connection, run on the connection's strand.
// Every asynchronous step is bound to the job's context (asio_cancellation).
struct exchange : std::enable_shared_from_this<exchange> {
  conn_ptr conn;
  tcp::resolver::results_type endpoints;
  context ctx;
  asio_cancellation<net::any_io_executor>* stop = nullptr;  // lives until `done` is set
  const upstream_client_options* opts = nullptr;
  std::string target, host, body, content_type, traceparent;
  std::optional<http::request<http::string_body>> req;
  std::optional<http::response_parser<http::string_body>> parser;
  std::promise<exchange_result> done;
  exchange_result result;

  void arm_timeout() {
    const duration left = ctx.deadline() == never ? opts->io_timeout : ctx.remaining() + std::chrono::seconds(1);
    conn->stream.expires_after(std::min(left, opts->io_timeout + std::chrono::seconds(1)));
  }

  void start() {
    if (conn->connected) return write();
    arm_timeout();
    conn->stream.async_connect(
        endpoints,
        net::bind_cancellation_slot(
            stop->slot(), [self = shared_from_this()](error_code ec, const tcp::endpoint&) { self->on_connect(ec); }));
    stop->emit_if_stopped();
  }

  void on_connect(error_code ec) {
    if (ec) return finish(ec);
    conn->connected = true;
    error_code ignored;
    conn->stream.socket().set_option(tcp::no_delay(true), ignored);
    write();
  }

  void write() {
    // The budget is measured as late as possible: right before sending.
    std::optional<std::string> timeout;
    if (ctx.deadline() != never) {
      const duration left = ctx.remaining() - opts->reserve;
      if (left <= duration::zero() || left < opts->min_budget) {
        result.too_little_budget = true;
        return finish({});
      }
      timeout = format_grpc_timeout(left);  // rounded down: never more than we have
    }
    req.emplace(http::verb::post, target, 11);
    req->set(http::field::host, host);
    req->set(http::field::user_agent, "hourglassd");
    if (timeout) req->set(request_timeout_header, *timeout);
    if (!traceparent.empty()) req->set("traceparent", traceparent);
    if (!body.empty() || !content_type.empty()) req->set(http::field::content_type, content_type);
    req->body() = std::move(body);
    req->keep_alive(true);
    req->prepare_payload();
    arm_timeout();
    http::async_write(
        conn->stream, *req,
        net::bind_cancellation_slot(stop->slot(),
                                    [self = shared_from_this()](error_code ec, std::size_t) { self->on_write(ec); }));
    stop->emit_if_stopped();
  }

  void on_write(error_code ec) {
    if (ec) return finish(ec);
    parser.emplace();
    parser->body_limit(opts->max_response_body);
    http::async_read(conn->stream, conn->buffer, *parser,
                     net::bind_cancellation_slot(
                         stop->slot(), [self = shared_from_this()](error_code e, std::size_t) { self->on_read(e); }));
    stop->emit_if_stopped();
  }

  void on_read(error_code ec) {
    if (!ec) result.res = parser->release();
    finish(ec);
  }

  void finish(error_code ec) {
    conn->stream.expires_never();
    result.ec = ec;
    result.got_some = parser && parser->got_some();
    done.set_value(std::move(result));  // last: the waiting worker may now go on
  }
};

bool stale_error(const error_code& ec) {
  return ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::connection_reset ||
         ec == net::error::broken_pipe || ec == net::error::connection_aborted;
}

// A pooled connection the peer has closed (or that holds unexpected bytes) is readable.
bool looks_healthy(connection& c) {
  pollfd p{};
  p.fd = c.stream.socket().native_handle();
  p.events = POLLIN | POLLRDHUP;
  return ::poll(&p, 1, 0) == 0;
}

// Closes a connection on its own strand (where its I/O objects live).
void discard(conn_ptr c) {
  auto ex = c->stream.get_executor();
  net::post(ex, [c = std::move(c)] {
    error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c->stream.close();
  });
}

}  // namespace

struct upstream_client::impl {
  struct upstream {
    std::string name;
    upstream_url url;
    std::string host_header;
    std::mutex mu;
    std::vector<conn_ptr> idle;
    std::unique_ptr<circuit_breaker> breaker;
    retry_budget budget{retry_budget::options{}};  // hedges to this upstream spend it
  };

  impl(net::io_context& i, upstream_client_options o) : io(i), opts(o), clk(o.clock ? *o.clock : real_clock()) {}

  conn_ptr acquire(upstream& u, bool& reused) {
    const time_point now = clk.now();
    std::unique_lock lock(u.mu);
    while (!u.idle.empty()) {
      conn_ptr c = std::move(u.idle.back());
      u.idle.pop_back();
      if (now - c->idle_since > opts.pool_idle_timeout || !looks_healthy(*c)) {
        discard(std::move(c));
        continue;
      }
      reused = true;
      return c;
    }
    lock.unlock();
    reused = false;
    return std::make_shared<connection>(io);
  }

  void release(upstream& u, conn_ptr c) {
    c->idle_since = clk.now();
    std::unique_lock lock(u.mu);
    if (u.idle.size() < opts.max_idle_per_upstream) {
      u.idle.push_back(std::move(c));
      return;
    }
    lock.unlock();
    discard(std::move(c));
  }

  net::io_context& io;
  upstream_client_options opts;
  hourglass::clock& clk;
  std::atomic<std::uint64_t> hedges_won{0}, hedges_lost{0}, hedges_skipped{0};
  std::map<std::string, std::unique_ptr<upstream>, std::less<>> upstreams;
};

upstream_client::upstream_client(net::io_context& io, const std::map<std::string, std::string>& upstreams,
                                 upstream_client_options options)
    : impl_(std::make_unique<impl>(io, options)) {
  for (const auto& [name, url] : upstreams) {
    auto u = std::make_unique<impl::upstream>();
    u->name = name;
    u->url = parse_upstream_url(url);
    u->host_header = support::parse_http_url(url, "upstream URL").host_header;
    u->breaker = std::make_unique<circuit_breaker>(impl_->clk, impl_->opts.breaker);
    impl_->upstreams.emplace(name, std::move(u));
  }
}

upstream_client::~upstream_client() = default;

bool upstream_client::has(std::string_view name) const noexcept { return impl_->upstreams.count(name) != 0; }

const circuit_breaker* upstream_client::breaker(std::string_view name) const noexcept {
  const auto it = impl_->upstreams.find(name);
  return it == impl_->upstreams.end() ? nullptr : it->second->breaker.get();
}

void upstream_client::write_metrics(exposition_writer& w) const {
  if (impl_->upstreams.empty()) return;
  constexpr std::string_view state = "hourglass_circuit_state";
  constexpr std::string_view rejected = "hourglass_circuit_rejected_total";
  constexpr std::string_view hedges = "hourglass_hedges_total";
  w.family(state, metric_type::gauge, "Circuit breaker per upstream: 0 closed, 1 half-open, 2 open.");
  for (const auto& [name, u] : impl_->upstreams) {
    w.sample(state, {{"upstream", name}}, static_cast<int>(u->breaker->state()));
  }
  w.family(rejected, metric_type::counter, "Calls failed at once by an open circuit breaker.");
  for (const auto& [name, u] : impl_->upstreams) {
    w.sample(rejected, {{"upstream", name}}, u->breaker->rejected_total());
  }
  w.family(hedges, metric_type::counter,
           "Hedged requests of call, by outcome (skipped: too little budget, or no retry token).");
  w.sample(hedges, {{"outcome", "won"}}, impl_->hedges_won.load());
  w.sample(hedges, {{"outcome", "lost"}}, impl_->hedges_lost.load());
  w.sample(hedges, {{"outcome", "skipped"}}, impl_->hedges_skipped.load());
}

void upstream_client::close_idle() noexcept {
  for (auto& [name, u] : impl_->upstreams) {
    std::vector<conn_ptr> idle;
    {
      std::lock_guard lock(u->mu);
      idle.swap(u->idle);
    }
    for (auto& c : idle) {
      try {
        discard(std::move(c));
      } catch (...) {
      }
    }
  }
}

upstream_response upstream_client::post_job(const context& ctx, std::string_view upstream, std::string_view handler,
                                            std::string body, std::string_view content_type,
                                            std::string_view traceparent) {
  const auto it = impl_->upstreams.find(upstream);
  if (it == impl_->upstreams.end()) throw std::invalid_argument("unknown upstream '" + std::string(upstream) + "'");
  if (!valid_handler_name(handler)) throw std::invalid_argument("invalid handler name");
  impl::upstream& u = *it->second;
  ctx.check();
  // An open breaker fails the call before anything is spent on it. A ticket
  // dropped without a verdict (the call was not made) records `ignored`.
  circuit_breaker::ticket ticket = u.breaker->admit();
  if (!ticket) throw stopped_error(status::rejected(reject_reason::circuit_open));
  u.budget.record_request(impl_->clk.now());  // what this upstream's hedges may spend

  for (int attempt = 0;; ++attempt) {
    ctx.check();
    bool reused = false;
    conn_ptr conn = impl_->acquire(u, reused);
    auto ex = std::make_shared<exchange>();
    ex->conn = conn;
    ex->ctx = ctx;
    ex->opts = &impl_->opts;
    ex->target = u.url.prefix + "/v1/jobs/" + std::string(handler);
    ex->host = u.host_header;
    ex->body = body;
    ex->content_type = std::string(content_type);
    ex->traceparent = std::string(traceparent);
    if (!conn->connected) {
      // Names of configured upstreams only; an IP literal resolves without DNS.
      tcp::resolver resolver(impl_->io);
      error_code ec;
      ex->endpoints = resolver.resolve(u.url.host, u.url.port, ec);
      if (ec) throw std::runtime_error("cannot resolve " + u.url.host + ": " + ec.message());
    }
    auto future = ex->done.get_future();
    exchange_result r;
    {
      asio_cancellation<net::any_io_executor> stop(ctx, conn->stream.get_executor());
      ex->stop = &stop;
      net::post(conn->stream.get_executor(), [ex] { ex->start(); });
      r = future.get();
    }
    ex.reset();

    if (r.too_little_budget) {
      impl_->release(u, std::move(conn));
      throw stopped_error(status::expired(expiry_stage::run));  // the call is not made
    }
    if (r.ec) {
      discard(std::move(conn));
      if (ctx.done()) {  // aborted: the deadline or a cancel
        ticket.record(detail::verdict_of_abort(ctx.stop_status()));
        throw stopped_error(ctx.stop_status());
      }
      if (reused && !r.got_some && attempt == 0 && stale_error(r.ec)) continue;  // the peer closed it while idle
      ticket.record(call_verdict::failure);
      throw std::runtime_error(r.ec.message());
    }
    upstream_response out;
    out.status = r.res.result_int();
    out.content_type = std::string(r.res[http::field::content_type]);
    out.job_outcome = std::string(r.res["Job-Outcome"]);  // Beast's parser adds trailers to the fields
    const bool keep = r.res.keep_alive();
    out.body = std::move(r.res.body());
    std::string stage;
    if (out.status == 504) {
      if (const auto v = support::parse_json(out.body); v && v->is_object()) {
        if (const auto* s = v->as_object().if_contains("stage"); s != nullptr && s->is_string()) {
          stage = std::string(s->get_string());
        }
      }
    }
    const auto answer = detail::effective_answer_of(out.status, stage, out.job_outcome);
    ticket.record(detail::verdict_of_answer(answer.http_status, answer.stage));
    if (keep) {
      impl_->release(u, std::move(conn));
    } else {
      discard(std::move(conn));
    }
    return out;
  }
}

namespace {
// Thrown out of a hedge's branch: a non-2xx answer (or a stream cut off) wins nothing.
struct answered_badly {
  upstream_response res;
};
}  // namespace

upstream_response upstream_client::post_job_hedged(executor& ex, const context& ctx,
                                                   const std::vector<std::string>& names, duration hedge_after,
                                                   std::string_view handler, const std::string& body,
                                                   std::string_view content_type, std::string_view traceparent) {
  if (names.empty()) throw std::invalid_argument("no upstream to call");
  for (const auto& n : names) {
    if (!has(n)) throw std::invalid_argument("unknown upstream '" + n + "'");
  }
  if (names.size() == 1) return post_job(ctx, names[0], handler, body, content_type, traceparent);

  std::atomic<int> winner{-1};
  std::atomic<int> sent{0};  // hedges sent (the first request is not one)
  // Each branch's non-2xx answer, in its own slot (read after first_of has
  // waited for every branch).
  std::vector<std::optional<upstream_response>> answered(names.size());
  const time_point t0 = ctx.get_clock().now();  // hedge i is due at t0 + i * hedge_after
  std::vector<branch_fn<upstream_response>> branches;
  for (std::size_t i = 0; i < names.size(); ++i) {
    // first_of waits for every branch before it returns: references stay valid.
    branches.emplace_back([&, i](const context& b) -> upstream_response {
      if (i > 0) {
        const auto n = static_cast<duration::rep>(i);
        const duration due = hedge_after.count() > duration::max().count() / n ? duration::max() : hedge_after * n;
        if (!b.sleep_until(saturating_add(t0, due))) b.check();  // decided before this hedge was due
        impl::upstream& u = *impl_->upstreams.find(names[i])->second;
        const bool fits = b.deadline() == never || (b.remaining() - impl_->opts.reserve > duration::zero() &&
                                                    b.remaining() - impl_->opts.reserve >= impl_->opts.min_budget);
        if (!fits || !u.budget.try_withdraw(impl_->clk.now())) {
          impl_->hedges_skipped.fetch_add(1);
          throw stopped_error(status::expired(expiry_stage::run));  // not sent: nothing said against the others
        }
        sent.fetch_add(1);
      }
      upstream_response r = post_job(b, names[i], handler, body, content_type, traceparent);
      // A stream cut off by its job's end did not succeed either.
      const unsigned status = detail::effective_answer_of(r.status, {}, r.job_outcome).http_status;
      if (status < 200 || status > 299) {
        answered[i] = r;
        throw answered_badly{std::move(r)};
      }
      int none = -1;
      winner.compare_exchange_strong(none, static_cast<int>(i));
      return r;
    });
  }
  fan_out_options fo;
  fo.max_concurrency = names.size();
  job_result<upstream_response> r = first_of(ex, ctx, std::move(branches), fo);
  const int w = winner.load();
  const int hedges_sent = sent.load();
  if (w > 0) impl_->hedges_won.fetch_add(1);
  impl_->hedges_lost.fetch_add(static_cast<std::uint64_t>(hedges_sent - (w > 0 ? 1 : 0)));
  if (r.ok()) return std::move(*r.result);
  for (auto& a : answered) {  // an upstream's own answer says more than another's I/O failure
    if (a) return std::move(*a);
  }
  if (r.error) {
    try {
      std::rethrow_exception(r.error);
    } catch (answered_badly& a) {
      return std::move(a.res);
    }
  }
  throw stopped_error(r.st);
}

}  // namespace hourglass::server
