#include "http/http_load.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
#include <deque>
#include <memory>
#include <ostream>
#include <stdexcept>
#include <vector>

#include "hourglass/budget_codec.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::bench {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;

namespace {

// The value of "key" in a JSON object ("" when absent): our error bodies.
std::string json_string_field(const std::string& body, const std::string& key) {
  return support::string_member(body, key).value_or("");
}

class load_run {
 public:
  load_run(const http_options& o, const std::function<void(const std::string&)>& progress)
      : o_(o), t_(support::parse_http_url(o.url, "URL")), progress_(progress), tick_(io_), report_timer_(io_) {
    if (!(o.rate > 0)) throw std::invalid_argument("--rate must be positive");
    if (o.connections == 0) throw std::invalid_argument("--connections must be at least 1");
    tcp::resolver resolver(io_);
    endpoints_ = resolver.resolve(t_.host, std::to_string(t_.port));
    for (std::size_t i = 0; i < o.connections; ++i) conns_.push_back(std::make_unique<conn>(io_));
    header_ = format_grpc_timeout(o.budget);
  }

  http_report run() {
    start_ = steady::now();
    end_ = start_ + o_.length;
    give_up_ = end_ + o_.budget + std::chrono::seconds(1);
    interval_ = std::chrono::duration<double>(1.0 / o_.rate);
    schedule_tick();
    schedule_report();
    io_.run();
    report_.elapsed_s = std::chrono::duration<double>(steady::now() - start_).count();
    report_.goodput_rps = static_cast<double>(report_.ok_in_deadline) / to_seconds(o_.length);
    report_.latency = latency_.snapshot();
    report_.expired_past_budget = expired_past_budget_.snapshot();
    return report_;
  }

 private:
  struct conn {
    explicit conn(asio::io_context& io) : stream(io) {}
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    bool connected = false;
    bool busy = false;
    steady::time_point scheduled;
    steady::time_point written;  // the request's write began
  };

  steady::time_point arrival(std::uint64_t i) const {
    return start_ + std::chrono::duration_cast<steady::duration>(interval_ * static_cast<double>(i));
  }

  void schedule_tick() {
    const auto now = steady::now();
    // Every arrival due by now joins the waiting line, stamped with its own time.
    while (arrival(next_) <= now && arrival(next_) < end_) {
      const auto lag = now - arrival(next_);
      report_.max_send_lag_ms = std::max(report_.max_send_lag_ms,
                                         std::chrono::duration<double, std::milli>(lag).count());
      waiting_.push_back(arrival(next_));
      ++next_;
      ++report_.offered;
    }
    dispatch();
    if (arrival(next_) >= end_) {
      finishing_ = true;
      maybe_stop();
      return;
    }
    // Wake for the next arrival, at most once a millisecond at high rates.
    tick_.expires_at(std::max(arrival(next_), now + std::chrono::microseconds(200)));
    tick_.async_wait([this](beast::error_code ec) {
      if (!ec) schedule_tick();
    });
  }

  void schedule_report() {
    report_timer_.expires_after(std::chrono::seconds(1));
    report_timer_.async_wait([this](beast::error_code ec) {
      if (ec) return;
      const double t = std::chrono::duration<double>(steady::now() - start_).count();
      char line[256];
      std::snprintf(line, sizeof line,
                    "[%5.1fs] offered %llu sent %llu ok %llu in-deadline %llu rejected %llu expired %llu errors %llu "
                    "waiting %zu",
                    t, static_cast<unsigned long long>(report_.offered), static_cast<unsigned long long>(report_.sent),
                    static_cast<unsigned long long>(report_.ok),
                    static_cast<unsigned long long>(report_.ok_in_deadline),
                    static_cast<unsigned long long>(sum(report_.rejected)),
                    static_cast<unsigned long long>(sum(report_.deadline_exceeded)),
                    static_cast<unsigned long long>(report_.errors), waiting_.size());
      if (progress_) progress_(line);
      if (!stopped_) schedule_report();
    });
  }

  static std::uint64_t sum(const std::map<std::string, std::uint64_t>& m) {
    std::uint64_t n = 0;
    for (const auto& [k, v] : m) n += v;
    return n;
  }

  void dispatch() {
    for (auto& c : conns_) {
      if (waiting_.empty()) return;
      if (c->busy) continue;
      c->busy = true;
      c->scheduled = waiting_.front();
      waiting_.pop_front();
      send(*c);
    }
  }

  void send(conn& c) {
    if (!c.connected) {
      c.stream.expires_after(std::chrono::seconds(2));
      c.stream.async_connect(endpoints_, [this, &c](beast::error_code ec, const tcp::endpoint&) {
        if (ec) return failed(c);
        c.stream.socket().set_option(tcp::no_delay(true));
        c.connected = true;
        write(c);
      });
      return;
    }
    write(c);
  }

  void write(conn& c) {
    c.req = {};
    c.req.method(http::verb::post);
    c.req.target(t_.path.empty() ? "/" : t_.path);
    c.req.version(11);
    c.req.set(http::field::host, t_.host_header);
    c.req.set("Request-Timeout", header_);
    c.req.set(http::field::content_type, "application/octet-stream");
    c.req.body() = o_.body;
    c.req.prepare_payload();
    c.res = {};
    c.stream.expires_at(give_up_);
    ++report_.sent;
    c.written = steady::now();
    http::async_write(c.stream, c.req, [this, &c](beast::error_code ec, std::size_t) {
      if (ec) return failed(c);
      http::async_read(c.stream, c.buffer, c.res, [this, &c](beast::error_code ec2, std::size_t) {
        if (ec2) return failed(c);
        answered(c);
      });
    });
  }

  void answered(conn& c) {
    const auto now = steady::now();
    const auto latency = now - c.scheduled;
    const int code = c.res.result_int();
    if (code == 200) {
      ++report_.ok;
      if (latency <= o_.budget) ++report_.ok_in_deadline;
      latency_.record(std::chrono::duration_cast<duration>(latency));
    } else if (code == 503 || (code == 400 && json_string_field(c.res.body(), "error") == "invalid_timeout")) {
      std::string reason = json_string_field(c.res.body(), "error");
      if (reason.empty() || reason == "rejected") reason = json_string_field(c.res.body(), "reason");
      ++report_.rejected[reason.empty() ? "unknown" : reason];
    } else if (code == 504) {
      const std::string stage = json_string_field(c.res.body(), "stage");
      ++report_.deadline_exceeded[stage.empty() ? "unknown" : stage];
      const auto past = now - (c.written + o_.budget);
      expired_past_budget_.record(std::max(std::chrono::duration_cast<duration>(past), duration::zero()));
    } else {
      ++report_.errors;
      ++report_.other_statuses[code];
    }
    if (!c.res.keep_alive()) close(c);
    release(c);
  }

  void failed(conn& c) {
    ++report_.errors;
    close(c);
    release(c);
  }

  void close(conn& c) {
    beast::error_code ignored;
    c.stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    c.stream.close();
    c.connected = false;
    c.buffer.clear();
  }

  void release(conn& c) {
    c.busy = false;
    if (steady::now() >= give_up_) {
      waiting_.clear();
    }
    dispatch();
    maybe_stop();
  }

  void maybe_stop() {
    if (!finishing_ || stopped_) return;
    bool idle = waiting_.empty();
    for (auto& c : conns_) idle = idle && !c->busy;
    if (idle) {
      stopped_ = true;
      tick_.cancel();
      report_timer_.cancel();
      for (auto& c : conns_) {
        if (c->connected) close(*c);
      }
    }
  }

  const http_options& o_;
  support::http_url t_;
  std::function<void(const std::string&)> progress_;
  asio::io_context io_;
  tcp::resolver::results_type endpoints_;
  std::vector<std::unique_ptr<conn>> conns_;
  asio::steady_timer tick_;
  asio::steady_timer report_timer_;
  std::deque<steady::time_point> waiting_;
  std::string header_;
  steady::time_point start_, end_, give_up_;
  std::chrono::duration<double> interval_{};
  std::uint64_t next_ = 0;
  bool finishing_ = false;
  bool stopped_ = false;
  http_report report_;
  log_histogram latency_{log_histogram::three_digits_precision};
  log_histogram expired_past_budget_{log_histogram::three_digits_precision};
};

double ns_to_ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

void add_map(support::json_writer& j, const std::map<std::string, std::uint64_t>& m) {
  j.begin_object();
  for (const auto& [k, v] : m) j.member(k, v);
  j.end_object();
}

std::string json_map(const std::map<std::string, std::uint64_t>& m) {
  support::json_writer j;
  add_map(j, m);
  return j.take();
}

}  // namespace

void add_latency_json(support::json_writer& j, const histogram_snapshot& h, double unit_ns) {
  const auto at = [&](double q) { return static_cast<double>(h.value_at_quantile(q)) / unit_ns; };
  j.begin_object().member("p50", at(0.5)).member("p90", at(0.9)).member("p99", at(0.99));
  j.member("p999", at(0.999)).member("max", static_cast<double>(h.count ? h.max_ns : 0) / unit_ns).end_object();
}

http_report run_http(const http_options& options, const std::function<void(const std::string&)>& progress) {
  load_run run(options, progress);
  return run.run();
}

void print_table(std::ostream& out, const http_report& r) {
  char line[512];
  std::snprintf(line, sizeof line,
                "offered %llu  sent %llu  ok %llu  ok in deadline %llu  goodput %.1f req/s  errors %llu\n",
                static_cast<unsigned long long>(r.offered), static_cast<unsigned long long>(r.sent),
                static_cast<unsigned long long>(r.ok), static_cast<unsigned long long>(r.ok_in_deadline), r.goodput_rps,
                static_cast<unsigned long long>(r.errors));
  out << line;
  out << "rejected " << json_map(r.rejected) << "  deadline_exceeded " << json_map(r.deadline_exceeded) << "\n";
  for (const auto& [code, n] : r.other_statuses) out << "status " << code << ": " << n << "\n";
  const auto& h = r.latency;
  std::snprintf(line, sizeof line,
                "latency of ok responses from the scheduled send (ms): p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  "
                "max %.3f\nmax generator lag %.3f ms over %.2f s\n",
                ns_to_ms(h.value_at_quantile(0.5)), ns_to_ms(h.value_at_quantile(0.9)),
                ns_to_ms(h.value_at_quantile(0.99)), ns_to_ms(h.value_at_quantile(0.999)),
                ns_to_ms(h.count ? h.max_ns : 0), r.max_send_lag_ms, r.elapsed_s);
  out << line;
  if (const auto& e = r.expired_past_budget; e.count > 0) {
    std::snprintf(line, sizeof line,
                  "504s after the budget (ms): p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (%llu answers)\n",
                  ns_to_ms(e.value_at_quantile(0.5)), ns_to_ms(e.value_at_quantile(0.9)),
                  ns_to_ms(e.value_at_quantile(0.99)), ns_to_ms(e.value_at_quantile(0.999)), ns_to_ms(e.max_ns),
                  static_cast<unsigned long long>(e.count));
    out << line;
  }
}

std::string to_json(const http_report& r) {
  const auto& h = r.latency;
  support::json_writer j;
  j.begin_object().member("offered", r.offered).member("sent", r.sent).member("ok", r.ok);
  j.member("ok_in_deadline", r.ok_in_deadline).member("goodput_rps", r.goodput_rps);
  add_map(j.key("rejected"), r.rejected);
  add_map(j.key("deadline_exceeded"), r.deadline_exceeded);
  j.member("errors", r.errors);
  add_latency_json(j.key("latency_ms"), h, 1e6);
  add_latency_json(j.key("expired_past_budget_ms"), r.expired_past_budget, 1e6);
  return j.end_object().take();
}

}  // namespace hourglass::bench
