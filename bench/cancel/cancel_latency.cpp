#include "cancel/cancel_latency.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <random>
#include <semaphore>
#include <stdexcept>
#include <thread>
#include <vector>

#include "hourglass/asio_bridge.hpp"
#include "hourglass/executor.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"

namespace hourglass::bench {

namespace {

using steady = std::chrono::steady_clock;
using namespace std::chrono_literals;

enum class wait_kind { sleep_for, asio_timer };

struct cancel_tally {
  log_histogram past{log_histogram::three_digits_precision};
  std::atomic<std::uint64_t> early{0};
  std::atomic<std::uint64_t> not_measured{0};

  void seen(time_point deadline, time_point when) noexcept {
    if (when < deadline) {
      early.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    past.record(when - deadline);
  }
};

// Blocks until the context stops it, on a timer an hour away that only the
// context's deadline can cut short; records when the wait ended.
void wait_in_sleep_for(const context& ctx, cancel_tally& t) {
  const time_point deadline = ctx.deadline();
  ctx.sleep_for(1h);
  t.seen(deadline, steady::now());
}

void wait_on_asio_timer(const context& ctx, cancel_tally& t) {
  thread_local boost::asio::io_context io;  // one per worker; run only by it
  const time_point deadline = ctx.deadline();
  time_point ended{};
  {
    boost::asio::steady_timer timer(io, 1h);
    asio_cancellation stop(ctx, io.get_executor());  // after the timer: destroyed first
    timer.async_wait(boost::asio::bind_cancellation_slot(
        stop.slot(), [&ended](const boost::system::error_code&) { ended = steady::now(); }));
    stop.emit_if_stopped();
    io.restart();
    io.run();  // until the timer's handler ran: only the emit can end the wait
  }
  t.seen(deadline, ended);
}

// The floor, in the same run: `concurrency` plain threads, each waiting on a
// condition variable until deadlines drawn the same way, with the same timer
// slack as hourglass's timer thread. No executor, no context, no callbacks:
// what the machine's timers and scheduler cost by themselves. With a
// `spin_margin`, each wait wakes that much early and spins to its deadline;
// `spun` adds up the time spent spinning.
histogram_snapshot measure_bare_waits(const cancel_options& o, duration spin_margin, cancel_tally& t,
                                      std::atomic<std::int64_t>& spun) {
  std::vector<std::thread> threads;
  const std::size_t per_thread = (o.jobs + o.concurrency - 1) / o.concurrency;
  for (std::size_t i = 0; i < o.concurrency; ++i) {
    threads.emplace_back([&o, &t, &spun, spin_margin, per_thread, i] {
      request_precise_timed_waits();  // as hourglass's timer thread and workers do
      std::mt19937_64 rng(i);
      std::uniform_int_distribution<std::int64_t> spread(0, o.budget.count());
      std::mutex mu;
      std::condition_variable cv;
      for (std::size_t n = 0; n < per_thread; ++n) {
        const time_point deadline = steady::now() + o.budget + duration(spread(rng));
        std::unique_lock lock(mu);
        cv.wait_until(lock, deadline - spin_margin, [] { return false; });
        const time_point woke = steady::now();
        time_point now = woke;
        while (now < deadline) now = steady::now();
        spun.fetch_add((now - woke).count(), std::memory_order_relaxed);
        t.seen(deadline, now);
      }
    });
  }
  for (auto& th : threads) th.join();
  return t.past.snapshot();
}

histogram_snapshot measure(const cancel_options& o, wait_kind kind, cancel_tally& t) {
  executor_options eo;
  eo.workers = o.concurrency;
  eo.queue_capacity = o.concurrency * 2 + 64;
  executor ex(eo);
  handler_metrics* h = &ex.handler(kind == wait_kind::sleep_for ? "sleep_for" : "asio_timer");
  std::counting_semaphore<> slots(static_cast<std::ptrdiff_t>(o.concurrency));
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::int64_t> spread(0, o.budget.count());
  for (std::size_t i = 0; i < o.jobs; ++i) {
    slots.acquire();
    job_options jo = job_options::within(ex.get_clock(), o.budget + duration(spread(rng)));
    jo.metrics = h;
    ex.submit(
        jo,
        [&t, kind](const context& ctx) {
          if (kind == wait_kind::sleep_for) {
            wait_in_sleep_for(ctx, t);
          } else {
            wait_on_asio_timer(ctx, t);
          }
        },
        [&t, &slots](job_result<std::monostate>&& r) noexcept {
          if (!r.timings.ran) t.not_measured.fetch_add(1, std::memory_order_relaxed);
          slots.release();
        });
  }
  // Every job ends by its own deadline, not by the shutdown's cancel.
  for (std::size_t i = 0; i < o.concurrency; ++i) slots.acquire();
  ex.shutdown();
  return t.past.snapshot();
}

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }

std::string quantiles_line(const char* name, const histogram_snapshot& h, double unit_ns) {
  char line[256];
  const auto at = [&](double q) { return static_cast<double>(h.value_at_quantile(q)) / unit_ns; };
  std::snprintf(line, sizeof line, "  %-14s %10.1f %10.1f %10.1f %10.1f %10.1f %10llu\n", name, at(0.5), at(0.9),
                at(0.99), at(0.999), static_cast<double>(h.count ? h.max_ns : 0) / unit_ns,
                static_cast<unsigned long long>(h.count));
  return line;
}

}  // namespace

cancel_report run_cancel(const cancel_options& o, const std::function<void(const std::string&)>& progress) {
  if (o.jobs == 0 || o.concurrency == 0) throw std::invalid_argument("--jobs and --concurrency must be at least 1");
  if (o.budget <= duration::zero()) throw std::invalid_argument("--budget must be positive");
  if (o.spin_margin < duration::zero() || o.spin_margin > o.budget) {
    throw std::invalid_argument("--spin-floor must be between 0 and --budget");
  }
  cancel_report r;
  r.options = o;
  {
    cancel_tally t;
    std::atomic<std::int64_t> spun{0};
    r.bare_wait = measure_bare_waits(o, duration::zero(), t, spun);
  }
  if (o.spin_margin > duration::zero()) {
    cancel_tally t;
    std::atomic<std::int64_t> spun{0};
    r.spin_wait = measure_bare_waits(o, o.spin_margin, t, spun);
    if (r.spin_wait.count != 0) r.spin_per_wait = duration(spun.load() / static_cast<std::int64_t>(r.spin_wait.count));
  }
  for (const wait_kind kind : {wait_kind::sleep_for, wait_kind::asio_timer}) {
    cancel_tally t;
    const histogram_snapshot h = measure(o, kind, t);
    (kind == wait_kind::sleep_for ? r.sleep_for : r.asio_timer) = h;
    r.early += t.early.load();
    r.not_measured += t.not_measured.load();
    if (progress) {
      progress(std::string(kind == wait_kind::sleep_for ? "ctx.sleep_for" : "asio timer") + ": p99 " +
               std::to_string(us(h.value_at_quantile(0.99))) + " us past the deadline");
    }
  }
  if (!o.url.empty()) {
    if (o.requests == 0 || o.connections == 0 || o.http_budget <= duration::zero()) {
      throw std::invalid_argument("--requests, --connections and --http-budget must be positive");
    }
    std::string base = o.url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    support::parse_http_url(base, "--url");  // a clear error before any load
    http_options ho;
    ho.url = base + "/v1/jobs/sleep";
    ho.body = R"({"ms": 600000})";  // ten minutes: only the budget ends it
    ho.budget = o.http_budget;
    ho.connections = o.connections;
    // Each connection holds a request for the budget: offered a little under
    // connections / budget, so a request rarely waits for a connection.
    ho.rate = 0.9 * static_cast<double>(o.connections) / to_seconds(o.http_budget);
    ho.length = std::chrono::duration_cast<duration>(
        std::chrono::duration<double>(static_cast<double>(o.requests) / ho.rate));
    r.http = run_http(ho, progress);
  }
  return r;
}

void print_table(std::ostream& out, const cancel_report& r) {
  const auto& o = r.options;
  char line[256];
  std::snprintf(line, sizeof line,
                "cancel: %zu jobs per wait, %zu waiting at once, each deadline %.3f-%.3f ms after its submission\n",
                o.jobs, o.concurrency, to_millis(o.budget), 2 * to_millis(o.budget));
  out << line;
  out << "from the deadline to the wait's end (us)  p50        p90        p99      p99.9        max       jobs\n";
  out << quantiles_line("bare cv wait", r.bare_wait, 1e3);
  out << quantiles_line("ctx.sleep_for", r.sleep_for, 1e3);
  out << quantiles_line("asio timer", r.asio_timer, 1e3);
  if (o.spin_margin > duration::zero()) {
    out << quantiles_line("cv wait + spin", r.spin_wait, 1e3);
    std::snprintf(line, sizeof line, "  (the spin floor woke %.1f us early and spun %.1f us per wait on average)\n",
                  to_millis(o.spin_margin) * 1e3, to_millis(r.spin_per_wait) * 1e3);
    out << line;
  }
  std::snprintf(line, sizeof line, "ended before the deadline: %llu   expired before they started: %llu\n",
                static_cast<unsigned long long>(r.early), static_cast<unsigned long long>(r.not_measured));
  out << line;
  if (r.http) {
    const auto& e = r.http->expired_past_budget;
    std::snprintf(line, sizeof line,
                  "over HTTP: %llu requests, %zu at once, budget %.0f ms; other answers: %llu ok, %llu errors\n",
                  static_cast<unsigned long long>(r.http->sent), o.connections, to_millis(o.http_budget),
                  static_cast<unsigned long long>(r.http->ok), static_cast<unsigned long long>(r.http->errors));
    out << line;
    out << "from the deadline to the 504 read (ms)     p50        p90        p99      p99.9        max    answers\n";
    out << quantiles_line("504", e, 1e6);
  }
}

std::string to_json(const cancel_report& r) {
  support::json_writer j;
  j.begin_object().member("jobs", r.options.jobs).member("concurrency", r.options.concurrency);
  j.member("budget_ms", to_millis(r.options.budget));
  add_latency_json(j.key("bare_wait_us"), r.bare_wait, 1e3);
  add_latency_json(j.key("sleep_for_us"), r.sleep_for, 1e3);
  add_latency_json(j.key("asio_timer_us"), r.asio_timer, 1e3);
  if (r.options.spin_margin > duration::zero()) {
    j.member("spin_margin_us", to_millis(r.options.spin_margin) * 1e3);
    add_latency_json(j.key("spin_wait_us"), r.spin_wait, 1e3);
    j.member("spin_per_wait_us", to_millis(r.spin_per_wait) * 1e3);
  }
  j.member("early", r.early).member("not_measured", r.not_measured);
  if (r.http) {
    j.key("http").begin_object().member("requests", r.http->sent).member("budget_ms", to_millis(r.options.http_budget));
    j.member("expired", r.http->expired_past_budget.count).member("ok", r.http->ok).member("errors", r.http->errors);
    add_latency_json(j.key("past_budget_ms"), r.http->expired_past_budget, 1e6);
    j.end_object();
  }
  return j.end_object().take();
}

}  // namespace hourglass::bench
