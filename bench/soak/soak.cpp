// hourglass-bench soak: the run (the verdict and the outputs are in soak_report.cpp).
#include "soak/soak.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>

#include "hourglass/budget_codec.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"
#include "soak/misbehaving_client.hpp"
#include "soak/process_stats.hpp"
#include "soak/request_pool.hpp"
#include "text.hpp"

namespace hourglass::bench {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

constexpr auto request_timeout = 10s;  // the soak's own requests: no answer within this is no answer
constexpr auto drain_extra = 15s;      // after the end, beyond the freshness, for the last async jobs
constexpr std::size_t examples_kept = 5;

std::string spin_body(std::int64_t us) { return "{\"us\": " + std::to_string(us) + "}"; }

// Sums every sample of each metric family in a Prometheus text exposition.
std::map<std::string, double> sum_by_name(const std::string& text) {
  std::map<std::string, double> sums;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (line.empty() || line[0] == '#') continue;
    const std::size_t name_end = line.find_first_of("{ ");
    const std::size_t value_at = line.rfind(' ');
    if (name_end == std::string::npos || value_at == std::string::npos) continue;
    try {
      sums[line.substr(0, name_end)] += std::stod(line.substr(value_at + 1));
    } catch (const std::exception&) {  // NaN, +Inf or garbage: not a count
    }
  }
  return sums;
}

double family(const std::map<std::string, double>& sums, const std::string& name) {
  const auto it = sums.find(name);
  return it == sums.end() ? not_measured : it->second;
}

// One request on a connection of its own, for the checks before and after the run.
std::optional<pool_answer> request_once(const tcp::resolver::results_type& endpoints, const std::string& host,
                                        const std::string& target) {
  asio::io_context io;
  request_pool pool(io, endpoints, host, 1, request_timeout);
  std::optional<pool_answer> out;
  pool.submit({http::verb::get, target, {}, {}}, [&](pool_answer a) { out = std::move(a); });
  io.run();
  return out;
}

// Closed loop: `connections` sync spin jobs in flight at all times, with a
// budget too large to matter; jobs finished ok per second is the capacity.
double measure_capacity(const tcp::resolver::results_type& endpoints, const std::string& host, const soak_options& o) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t connections = std::clamp<std::size_t>(4 * cores, 8, 64);
  asio::io_context io;
  request_pool pool(io, endpoints, host, connections, request_timeout);
  const pool_request job{http::verb::post,
                         "/v1/jobs/spin",
                         {{"Request-Timeout", "10S"}, {"Content-Type", "application/json"}},
                         spin_body(o.spin_us)};
  const auto start = steady::now();
  const auto end = start + o.capacity_probe;
  std::uint64_t ok = 0, other = 0;
  std::function<void()> one = [&] {
    pool.submit(job, [&](pool_answer a) {
      const bool in_time = steady::now() <= end;
      if (a.answered && a.status == 200) ok += in_time ? 1 : 0;
      else ++other;
      if (in_time) one();
    });
  };
  for (std::size_t i = 0; i < connections; ++i) one();
  io.run();
  if (ok == 0) {
    throw std::runtime_error("capacity probe: no spin job finished ok in " + format_human_duration(o.capacity_probe) +
                             " (" + std::to_string(other) + " failed)");
  }
  return static_cast<double>(ok) / to_seconds(o.capacity_probe);
}

class soak_run final : public misbehaving_client::owner {
 public:
  soak_run(const soak_options& o, const std::function<void(const std::string&)>& progress)
      : o_(o),
        url_(support::parse_http_url(o.url, "--url")),
        progress_(progress),
        tick_(io_),
        sample_timer_(io_),
        slow_timer_(io_) {
    if (!url_.path.empty() && url_.path != "/") throw std::invalid_argument("--url is the daemon's, without a path");
    if (o.pid <= 0) throw std::invalid_argument("--pid must name the daemon's process");
    if (!(o.load > 0)) throw std::invalid_argument("--load must be positive");
    if (!(o.async_share >= 0 && o.async_share <= 1)) throw std::invalid_argument("--async-share must be in [0, 1]");
    if (o.spin_us < 0 || o.spin_us > 60'000'000) throw std::invalid_argument("--spin-us must be in [0, 60000000]");
    if (o.length < 3s) throw std::invalid_argument("--duration must be at least 3s (three windows of a second)");
    if (o.slow_rate < 0) throw std::invalid_argument("--slow-rate must not be negative");
    if (!read_process_stats(o.pid)) {
      throw std::invalid_argument("--pid " + std::to_string(o.pid) + ": no such process readable in /proc");
    }
    tcp::resolver resolver(io_);
    endpoints_ = resolver.resolve(url_.host, std::to_string(url_.port));
  }

  soak_report run() {
    const auto health = request_once(endpoints_, url_.host_header, "/metrics");
    if (!health || !health->answered || health->status != 200) {
      throw std::runtime_error("GET /metrics on " + o_.url + " failed: " +
                               (health && health->answered ? "status " + std::to_string(health->status)
                                                           : (health ? health->failure : std::string("no answer"))));
    }
    r_.options = o_;
    r_.store_metric_found = sum_by_name(health->body).count(o_.store_metric) != 0;
    r_.capacity_measured = !(o_.capacity > 0);
    r_.capacity_rps = r_.capacity_measured ? measure_capacity(endpoints_, url_.host_header, o_) : o_.capacity;
    r_.offered_rps = o_.load * r_.capacity_rps;
    async_rate_ = r_.offered_rps * o_.async_share;
    say("capacity " + fixed(r_.capacity_rps, 1) + " jobs/s (" + (r_.capacity_measured ? "measured" : "given") +
        "); offering " + fixed(r_.offered_rps, 1) + " jobs/s: sync " + fixed(r_.offered_rps - async_rate_, 1) +
        ", async " + fixed(async_rate_, 1) + "; " + fixed(o_.slow_rate, 1) + " misbehaving connections/s");
    if (!r_.store_metric_found) {
      say("the daemon exports no '" + o_.store_metric +
          "' gauge: the async store's size is not sampled (its bound is checked through --async-ttl instead)");
    }

    async_pool_ = std::make_unique<request_pool>(io_, endpoints_, url_.host_header, o_.async_connections,
                                                 request_timeout);
    metrics_pool_ = std::make_unique<request_pool>(io_, endpoints_, url_.host_header, 1, request_timeout);
    start_ = steady::now();
    end_ = start_ + o_.length;
    drain_until_ = end_ + o_.freshness + drain_extra;
    async_interval_ = async_rate_ > 0 ? std::chrono::duration<double>(1.0 / async_rate_)
                                      : std::chrono::duration<double>(1e9);

    std::exception_ptr sync_error;
    std::thread sync_thread([&] {
      try {
        r_.sync = run_http(sync_options(), o_.verbose ? progress_ : std::function<void(const std::string&)>());
      } catch (...) {
        sync_error = std::current_exception();
      }
    });
    schedule_tick();
    schedule_sample(1);
    if (o_.slow_rate > 0) schedule_slow(1);
    io_.run();
    sync_thread.join();
    if (sync_error) std::rethrow_exception(sync_error);
    r_.elapsed_s = std::chrono::duration<double>(steady::now() - start_).count();
    if (!r_.daemon_exited) r_.in_flight_after = in_flight_when_quiet();
    judge(r_);
    return r_;
  }

  // misbehaving_client::owner
  void on_closed_by_server(std::optional<double> after_s) override {
    ++r_.slow.closed_by_server;
    if (after_s) r_.slow.max_close_s = std::max(r_.slow.max_close_s, *after_s);
  }
  void on_held(misbehaving_kind kind) override {
    ++r_.slow.held;
    ++r_.slow.held_by_kind[to_string(kind)];
  }
  void on_connect_failed() override { ++r_.slow.connect_failed; }
  void on_abandoned() override { ++r_.slow.abandoned; }
  void on_gone(misbehaving_client* c) override { live_slow_.erase(c); }

 private:
  void say(const std::string& line) const {
    if (progress_) progress_(line);
  }

  http_options sync_options() const {
    http_options h;
    h.url = "http://" + url_.host_header + "/v1/jobs/spin";
    h.rate = std::max(r_.offered_rps - async_rate_, 0.001);
    h.length = o_.length;
    h.budget = o_.budget;
    h.body = spin_body(o_.spin_us);
    // Enough for every request to take its whole budget (a daemon answers by the deadline)
    // and then some: a generator short of connections falls behind, and its late
    // requests would count as unanswered.
    h.connections = o_.sync_connections != 0 ? o_.sync_connections
                                             : static_cast<std::size_t>(1.25 * h.rate * to_seconds(o_.budget)) + 32;
    return h;
  }

  bool running() const { return !stopping_ && steady::now() < end_; }

  // ---- async jobs: arrivals, polls, TTL checks ----

  time_point arrival(std::uint64_t i) const {
    return start_ + std::chrono::duration_cast<steady::duration>(async_interval_ * static_cast<double>(i));
  }

  void schedule_tick() {
    const auto now = steady::now();
    while (running() && async_rate_ > 0 && arrival(next_async_) <= now) {
      submit_async();
      ++next_async_;
    }
    while (!polls_.empty() && polls_.front().at <= now) {
      poll(std::move(polls_.front().location), polls_.front().unfinished_at);
      polls_.pop_front();
    }
    while (!ttl_checks_.empty() && ttl_checks_.front().at <= now) {
      if (running()) check_forgotten(std::move(ttl_checks_.front().location));
      ttl_checks_.pop_front();
    }
    if (!running()) {
      ttl_checks_.clear();  // not due within the run: not waited for
      if (drained() || now >= drain_until_ || stopping_) return finish();
    }
    const auto next = running() ? std::min(arrival(next_async_), now + 5ms) : now + 10ms;
    tick_.expires_at(std::max(next, now + 200us));
    tick_.async_wait([this](boost::system::error_code ec) {
      if (!ec) schedule_tick();
    });
  }

  bool drained() const {
    return sampling_done_ && polls_.empty() && polls_on_wire_ == 0 && async_pool_->pending() == 0 &&
           metrics_pool_->pending() == 0;
  }

  void finish() {
    r_.async.unresolved = polls_.size() + polls_on_wire_;
    polls_.clear();
    sample_timer_.cancel();  // only left armed when the drain timed out
    slow_timer_.cancel();
    stop_misbehaving_clients();
    async_pool_->close();
    metrics_pool_->close();
  }

  void ask(pool_request req, std::function<void(const pool_answer&)> on_answer) {
    ++r_.async.requests;
    async_pool_->submit(std::move(req), [this, on_answer = std::move(on_answer)](pool_answer a) {
      if (a.answered) {
        ++r_.async.answered;
      } else if (r_.unanswered_examples.size() < examples_kept) {
        r_.unanswered_examples.push_back("async: " + a.failure);
      }
      on_answer(a);
    });
  }

  void submit_async() {
    ++r_.async.submitted;
    pool_request req{http::verb::post,
                     "/v1/jobs/spin",
                     {{"Prefer", "respond-async"},
                      {"Job-Freshness", format_grpc_timeout(o_.freshness)},
                      {"Content-Type", "application/json"}},
                     spin_body(o_.spin_us)};
    ask(std::move(req), [this, asked = steady::now()](const pool_answer& a) {
      if (!a.answered) return;
      if (a.status == 202 && !a.location.empty()) {
        ++r_.async.accepted;
        polls_.push_back({steady::now() + o_.poll_interval, a.location, asked});
      } else if (a.status == 503 || a.status == 504) {
        ++r_.async.refused;
      } else {
        ++r_.async.other_statuses[a.status];
      }
    });
  }

  // `unfinished_at`: a request asked before this time saw the job unfinished, so
  // it finished later, and the daemon must keep it until at least that + TTL.
  void poll(std::string location, time_point unfinished_at) {
    ++polls_on_wire_;
    const auto asked = steady::now();
    ask({http::verb::get, location, {}, {}}, [this, location, asked, unfinished_at](const pool_answer& a) {
      --polls_on_wire_;
      if (!a.answered) return;  // counted unanswered; the job is not followed further
      if (a.status == 404) {
        const bool within_ttl = o_.async_ttl > duration::zero() && steady::now() < unfinished_at + o_.async_ttl;
        ++(within_ttl ? r_.async.lost : r_.async.expired_unseen);
        return;
      }
      if (a.status != 200) {
        ++r_.async.other_statuses[a.status];
        return;
      }
      const std::string state = support::string_member(a.body, "state").value_or("?");
      if (state == "queued" || state == "running") {
        polls_.push_back({steady::now() + o_.poll_interval, location, asked});
        return;
      }
      ++r_.async.finished;
      ++r_.async.final_states[state];
      // Checked after the TTL, a few a second: enough to see records that are never purged.
      const auto now = steady::now();
      if (o_.async_ttl > duration::zero() && now - last_ttl_pick_ >= 50ms) {
        last_ttl_pick_ = now;
        ttl_checks_.push_back({now + o_.async_ttl + 1s, location, now});
      }
    });
  }

  void check_forgotten(std::string location) {
    ++r_.async.ttl_checked;
    ask({http::verb::get, location, {}, {}}, [this](const pool_answer& a) {
      if (a.answered && a.status == 200) ++r_.async.kept_past_ttl;
    });
  }

  // ---- misbehaving clients ----

  void schedule_slow(std::uint64_t i) {
    slow_timer_.expires_at(start_ + std::chrono::duration_cast<steady::duration>(
                                        std::chrono::duration<double>(static_cast<double>(i) / o_.slow_rate)));
    slow_timer_.async_wait([this, i](boost::system::error_code ec) {
      if (ec || !running()) return;
      misbehaving_client::settings s{url_.host_header, o_.slow_hold, o_.budget, spin_body(o_.spin_us)};
      auto c = std::make_shared<misbehaving_client>(io_, endpoints_.begin()->endpoint(), *this,
                                                    static_cast<misbehaving_kind>(i % misbehaving_kinds), s);
      live_slow_[c.get()] = c;
      ++r_.slow.opened;
      c->start();
      schedule_slow(i + 1);
    });
  }

  void stop_misbehaving_clients() {
    auto live = std::move(live_slow_);
    live_slow_.clear();
    for (auto& [p, c] : live) {
      if (c->stop()) ++r_.slow.cut_short;
    }
  }

  // ---- sampling ----

  void schedule_sample(std::uint64_t k) {
    sample_timer_.expires_at(start_ + std::chrono::seconds(k));
    sample_timer_.async_wait([this, k](boost::system::error_code ec) {
      if (ec) return;
      take_sample(static_cast<double>(k));
      if (!r_.daemon_exited && start_ + std::chrono::seconds(k) < end_) return schedule_sample(k + 1);
      sampling_done_ = true;
    });
  }

  void take_sample(double t) {
    soak_sample s;
    s.t_s = t;
    const auto ps = read_process_stats(o_.pid);
    if (!ps) {
      r_.daemon_exited = true;
      stopping_ = true;
      say("the daemon (pid " + std::to_string(o_.pid) + ") is gone at " + fixed(t, 0) + " s");
      return;
    }
    const auto due = start_ + std::chrono::seconds(static_cast<long>(t));
    s.late_ms = std::chrono::duration<double, std::milli>(steady::now() - due).count();
    s.load_average = machine_load_average();
    s.rss_kib = static_cast<double>(ps->rss_kib);
    s.fds = static_cast<double>(ps->fds);
    s.threads = static_cast<double>(ps->threads);
    s.own_connections = static_cast<double>(own_connections_to_port(url_.port));
    s.async_offered = r_.async.requests;
    s.async_answered = r_.async.answered;
    s.async_backlog = async_pool_->pending();
    s.slow_open = live_slow_.size();
    const std::size_t index = r_.samples.size();
    r_.samples.push_back(s);
    ++r_.metrics_requests;
    metrics_pool_->submit({http::verb::get, "/metrics", {}, {}}, [this, index](pool_answer a) {
      if (!a.answered || a.status != 200) {
        if (r_.unanswered_examples.size() < examples_kept) {
          r_.unanswered_examples.push_back("metrics: " +
                                           (a.answered ? "status " + std::to_string(a.status) : a.failure));
        }
        if (a.answered) ++r_.metrics_answered;
        return;
      }
      ++r_.metrics_answered;
      const auto sums = sum_by_name(a.body);
      soak_sample& x = r_.samples[index];
      x.async_store = family(sums, o_.store_metric);
      x.queue_depth = family(sums, "hourglass_queue_depth");
      x.workers_busy = family(sums, "hourglass_workers_busy");
      x.admitted_total = family(sums, "hourglass_jobs_admitted_total");
      x.rejected_total = family(sums, "hourglass_jobs_rejected_total");
      x.finished_total = family(sums, "hourglass_jobs_finished_total");
      x.in_flight = x.admitted_total - x.finished_total;
      char line[320];
      std::snprintf(line, sizeof line,
                    "[%4.0fs] rss %.1f MiB  fds %.0f (own conns %.0f)  threads %.0f  store %s  queue %.0f  in flight "
                    "%.0f | async %llu/%llu answered (backlog %llu), %llu accepted | slow open %llu, closed %llu, "
                    "held %llu",
                    x.t_s, x.rss_kib / 1024, x.fds, x.own_connections, x.threads,
                    std::isnan(x.async_store) ? "-" : fixed(x.async_store, 0).c_str(), x.queue_depth, x.in_flight,
                    static_cast<unsigned long long>(x.async_answered), static_cast<unsigned long long>(x.async_offered),
                    static_cast<unsigned long long>(x.async_backlog),
                    static_cast<unsigned long long>(r_.async.accepted), static_cast<unsigned long long>(x.slow_open),
                    static_cast<unsigned long long>(r_.slow.closed_by_server),
                    static_cast<unsigned long long>(r_.slow.held));
      say(line);
    });
  }

  // Jobs admitted and not finished, once nothing of ours is left in the daemon;
  // the accounting invariant says 0. Read again for a few seconds while it is not.
  double in_flight_when_quiet() {
    double in_flight = not_measured;
    for (int attempt = 0; attempt < 25; ++attempt) {
      const auto a = request_once(endpoints_, url_.host_header, "/metrics");
      if (a && a->answered && a->status == 200) {
        const auto sums = sum_by_name(a->body);
        in_flight = family(sums, "hourglass_jobs_admitted_total") - family(sums, "hourglass_jobs_finished_total");
        if (in_flight == 0) break;
      }
      std::this_thread::sleep_for(200ms);
    }
    return in_flight;
  }

  struct due {
    time_point at;
    std::string location;
    time_point unfinished_at;  // polls: see poll()
  };

  const soak_options& o_;
  support::http_url url_;
  std::function<void(const std::string&)> progress_;
  asio::io_context io_;
  tcp::resolver::results_type endpoints_;
  asio::steady_timer tick_, sample_timer_, slow_timer_;
  std::unique_ptr<request_pool> async_pool_, metrics_pool_;
  std::map<misbehaving_client*, std::shared_ptr<misbehaving_client>> live_slow_;
  std::deque<due> polls_, ttl_checks_;
  std::size_t polls_on_wire_ = 0;
  time_point start_, end_, drain_until_, last_ttl_pick_{};
  std::chrono::duration<double> async_interval_{};
  double async_rate_ = 0;
  std::uint64_t next_async_ = 0;
  bool stopping_ = false;       // the daemon is gone
  bool sampling_done_ = false;  // the last second's sample is taken
  soak_report r_;
};

}  // namespace

soak_report run_soak(const soak_options& options, const std::function<void(const std::string&)>& progress) {
  soak_run run(options, progress);
  return run.run();
}

}  // namespace hourglass::bench
