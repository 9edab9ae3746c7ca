#include "overload/overload.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "hourglass/executor.hpp"
#include "hourglass/histogram.hpp"
#include "overload/generator.hpp"
#include "overload/noise.hpp"
#include "overload/work.hpp"

namespace hourglass::bench {

namespace {

using sclock = std::chrono::steady_clock;

enum class fate : std::uint8_t {
  pending,
  good,
  late,
  cancelled_run,
  expired_queue,
  rejected_queue_full,
  rejected_budget,
  rejected_other,
  cut_off,
  error
};

// One arrival. Written once by whichever thread delivers its outcome; read
// after the policy has been stopped (a join orders the two).
struct job_slot {
  time_point scheduled{};
  time_point done{};
  duration run{};  // wall time from start to end of the job's function
  duration cpu{};  // CPU time the worker spent in it
  fate f = fate::pending;
};

struct run_setup {
  duration quantum{};
  duration service{};
  duration budget{};
  duration min_budget{};
  std::size_t workers = 1;
  std::size_t queue_capacity = 1024;
  bool noise = false;  // the workers' cores are shared with a hog: keep the generator off them
};

class policy_runner {
 public:
  virtual ~policy_runner() = default;
  // Generator thread: offer arrival i, scheduled at `at`.
  virtual void send(std::size_t i, time_point at) = 0;
  // Main thread, after the window: let the policy work until `until`, then
  // stop it. On return every slot of a sent arrival has its fate.
  virtual void stop(time_point until) = 0;
};

// `hourglass` and `fifo`: the embedded executor, deadline checks on or off.
class executor_runner final : public policy_runner {
 public:
  executor_runner(const run_setup& setup, bool checks, std::vector<job_slot>& slots)
      : setup_(setup), checks_(checks), slots_(slots), ex_(make_options(setup, checks)), h_(&ex_.handler("bench")) {}

  void send(std::size_t i, time_point at) override {
    job_options o;
    o.metrics = h_;
    o.deadline = at + setup_.budget;
    if (checks_) o.min_budget = setup_.min_budget;
    slots_[i].scheduled = at;
    const duration s = setup_.service;
    job_slot* slot = &slots_[i];
    ex_.submit(
        o,
        [s, slot](const context& ctx) {
          cpu_meter meter(slot->cpu);
          spin_for(s, &ctx);
        },
        [slot](job_result<std::monostate>&& r) noexcept { settle(*slot, r); });
  }

  void stop(time_point until) override { ex_.shutdown(until); }

 private:
  static executor_options make_options(const run_setup& s, bool checks) {
    executor_options o;
    o.workers = s.workers;
    o.queue_capacity = s.queue_capacity;
    o.deadline_checks = checks;
    return o;
  }

  static void settle(job_slot& slot, const job_result<std::monostate>& r) noexcept {
    slot.done = sclock::now();
    slot.run = r.timings.ran ? r.timings.run_time : duration::zero();
    const status& st = r.st;
    switch (st.code) {
      case outcome::ok: slot.f = fate::good; break;
      case outcome::error: slot.f = fate::error; break;
      case outcome::rejected:
        slot.f = st.reason == reject_reason::queue_full ? fate::rejected_queue_full : fate::rejected_other;
        break;
      case outcome::deadline_exceeded:
        if (st.stage == expiry_stage::admission) slot.f = fate::rejected_budget;
        else if (st.stage == expiry_stage::queue) slot.f = fate::expired_queue;
        else slot.f = r.timings.completed_late ? fate::late : fate::cancelled_run;
        break;
      case outcome::cancelled: slot.f = fate::cut_off; break;
      case outcome::invalid: slot.f = fate::rejected_other; break;
    }
  }

  run_setup setup_;
  bool checks_;
  std::vector<job_slot>& slots_;
  executor ex_;
  handler_metrics* h_;
};

// `asio`: a plain boost::asio::thread_pool that runs everything it is given.
class asio_runner final : public policy_runner {
 public:
  asio_runner(const run_setup& setup, std::vector<job_slot>& slots)
      : setup_(setup), slots_(slots), pool_(setup.workers) {}

  void send(std::size_t i, time_point at) override {
    slots_[i].scheduled = at;
    boost::asio::post(pool_, [this, i, at] {
      job_slot& slot = slots_[i];
      if (abandon_.load(std::memory_order_relaxed)) {
        slot.f = fate::cut_off;
        return;
      }
      const time_point start = sclock::now();
      {
        cpu_meter meter(slot.cpu);
        spin_for(setup_.service, nullptr, &abandon_);
      }
      const time_point end = sclock::now();
      slot.done = end;
      slot.run = end - start;
      if (end - start < setup_.service) slot.f = fate::cut_off;
      else slot.f = end <= at + setup_.budget ? fate::good : fate::late;
    });
  }

  void stop(time_point until) override {
    std::this_thread::sleep_until(until);
    abandon_.store(true, std::memory_order_relaxed);
    pool_.join();
  }

 private:
  run_setup setup_;
  std::vector<job_slot>& slots_;
  boost::asio::thread_pool pool_;
  std::atomic<bool> abandon_{false};
};

std::unique_ptr<policy_runner> make_runner(const std::string& policy, const run_setup& setup,
                                           std::vector<job_slot>& slots) {
  if (policy == "hourglass") return std::make_unique<executor_runner>(setup, true, slots);
  if (policy == "fifo") return std::make_unique<executor_runner>(setup, false, slots);
  if (policy == "asio") return std::make_unique<asio_runner>(setup, slots);
  throw std::invalid_argument("unknown policy: " + policy);
}

struct executed_run {
  std::vector<job_slot> slots;  // the sent ones
  generator_report gen;
  time_point start{};
};

// Offers `schedule` to a fresh instance of `policy` and collects every fate.
executed_run execute(const std::string& policy, const run_setup& setup, std::vector<time_point> schedule,
                     time_point window_end) {
  executed_run out;
  out.slots.resize(schedule.size());
  auto runner = make_runner(policy, setup, out.slots);
  std::thread gen([&] {
    if (setup.noise) cpu_noise::pin_to_generator_cores(setup.workers);
    out.gen = run_generator(schedule, window_end, setup.quantum,
                            [&](std::size_t i, time_point at) { runner->send(i, at); });
  });
  gen.join();
  // After this, no job that arrived in the window can still end good.
  runner->stop(window_end + setup.budget + setup.service);
  runner.reset();
  out.slots.resize(out.gen.sent);
  return out;
}

struct tally {
  outcome_counts counts;
  duration busy{}, wasted{};            // CPU time
  duration busy_wall{}, wasted_wall{};  // wall time
  histogram_snapshot latency{log_bucket_layout::three_digits_precision};
};

tally count(const std::vector<job_slot>& slots, std::size_t from, std::size_t to) {
  tally t;
  log_histogram lat(log_histogram::three_digits_precision);
  for (std::size_t i = from; i < to; ++i) {
    const job_slot& s = slots[i];
    auto& c = t.counts;
    ++c.offered;
    t.busy += s.cpu;
    t.busy_wall += s.run;
    if (s.f != fate::good) {
      t.wasted += s.cpu;
      t.wasted_wall += s.run;
    }
    switch (s.f) {
      case fate::good:
        ++c.good;
        lat.record(s.done - s.scheduled);
        break;
      case fate::late: ++c.completed_late; break;
      case fate::cancelled_run: ++c.cancelled_run; break;
      case fate::expired_queue: ++c.expired_queue; break;
      case fate::rejected_queue_full: ++c.rejected_queue_full; break;
      case fate::rejected_budget: ++c.rejected_budget; break;
      case fate::rejected_other: ++c.rejected_other; break;
      case fate::pending:
      case fate::cut_off: ++c.cut_off; break;
      case fate::error: ++c.errors; break;
    }
  }
  t.latency = lat.snapshot();
  return t;
}

double ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Closed loop, saturating: `in_flight` jobs always submitted; each good
// completion submits the next. Returns completions per second.
// Set while this thread is inside measure_capacity's ex.submit: a completion
// called from there is a refusal at admission, delivered synchronously.
thread_local bool submitting_capacity_job = false;

double measure_capacity(const run_setup& setup, duration length) {
  executor_options eo;
  eo.workers = setup.workers;
  eo.queue_capacity = setup.queue_capacity;
  executor ex(eo);
  handler_metrics* h = &ex.handler("capacity");
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> done{0};
  // Places in the loop whose job was refused at admission, handed back to
  // the main thread. Resubmitting them from the refusal's own callback
  // recursed: a CPU stall makes the predicted wait refuse every job at once,
  // and the stack overflowed (the SIGSEGV seen once in five runs of
  // bench.overload_smoke under TSan; reproduced in Release with --repeat).
  std::atomic<std::uint64_t> owed{0};
  std::function<void()> submit_one = [&] {
    job_options o;
    o.metrics = h;
    o.deadline = sclock::now() + setup.budget;
    o.min_budget = setup.min_budget;
    const duration s = setup.service;
    submitting_capacity_job = true;
    ex.submit(
        o,
        [s](const context& ctx) {
          duration cpu{};
          cpu_meter meter(cpu);  // the same work as in the runs, meter included
          spin_for(s, &ctx);
        },
        [&](job_result<std::monostate>&& r) noexcept {
          if (r.ok()) done.fetch_add(1, std::memory_order_relaxed);
          // A failed job (late on a loaded machine) still hands its place in
          // the loop on, or the loop would die out; a refusal at shutdown
          // ends it; a refusal inside our own submit is owed, not recursed.
          if (stop.load(std::memory_order_relaxed) || r.st.code == outcome::rejected) return;
          if (submitting_capacity_job) {
            owed.fetch_add(1, std::memory_order_relaxed);
          } else {
            submit_one();
          }
        });
    submitting_capacity_job = false;
  };
  // Sleeps `d`, paying what is owed each millisecond.
  const auto wait = [&](duration d) {
    const auto until = sclock::now() + d;
    while (sclock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      for (auto n = owed.exchange(0, std::memory_order_relaxed); n > 0; --n) submit_one();
    }
  };
  const std::size_t in_flight = 2 * setup.workers;
  for (std::size_t i = 0; i < in_flight; ++i) submit_one();
  wait(std::min<duration>(length / 4, std::chrono::milliseconds(250)));  // warm-up
  // Best of three windows: on a shared machine noise only ever lowers a
  // window's rate, and the capacity is what the workers can do, not what a
  // neighbour's compile left them.
  double best = 0;
  for (int w = 0; w < 3; ++w) {
    const auto n0 = done.load();
    const auto t0 = sclock::now();
    wait(length / 3);
    const auto n1 = done.load();
    const auto t1 = sclock::now();
    best = std::max(best, static_cast<double>(n1 - n0) / to_seconds(t1 - t0));
  }
  stop.store(true);
  ex.shutdown(sclock::now() + setup.budget);
  return best;
}

run_setup setup_of(const overload_options& o) {
  return run_setup{o.send_quantum, o.service_time, o.budget, o.min_budget, o.workers, o.queue_capacity, o.noise > 0};
}

}  // namespace

overload_options resolve(overload_options o) {
  if (o.policies.empty()) throw std::invalid_argument("no policies");
  for (const auto& p : o.policies) {
    if (p != "hourglass" && p != "fifo" && p != "asio") {
      throw std::invalid_argument("unknown policy '" + p + "' (expected hourglass, fifo or asio)");
    }
  }
  for (double l : o.loads) {
    if (!(l > 0) || !std::isfinite(l)) throw std::invalid_argument("loads must be positive multiples of capacity");
  }
  for (double l : o.step_loads) {
    if (!(l > 0) || !std::isfinite(l)) throw std::invalid_argument("step loads must be positive");
  }
  if (o.service_time <= duration::zero()) throw std::invalid_argument("service time must be positive");
  if (o.budget == duration::zero()) o.budget = 10 * o.service_time;
  if (o.min_budget == duration::zero()) o.min_budget = o.service_time;
  if (o.budget < o.service_time) throw std::invalid_argument("budget must be at least the service time");
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (o.workers == 0) o.workers = cores - 1;
  if (o.workers == 0) o.workers = 1;
  // With a core of its own the generator sends each arrival on time: batching
  // them cost s = 100 us runs 3-4 % of goodput (sent up to a quantum late, and
  // in bursts). Sharing the workers' cores, each wake-up preempts a job, so
  // there it wakes at most once per budget / 20.
  if (o.send_quantum < duration::zero()) o.send_quantum = o.workers < cores ? duration::zero() : o.budget / 20;
  if (o.run_length <= duration::zero() || o.capacity_length <= duration::zero() || o.step_phase <= duration::zero() ||
      o.step_bin <= duration::zero()) {
    throw std::invalid_argument("durations must be positive");
  }
  if (o.queue_capacity == 0) throw std::invalid_argument("queue capacity must be positive");
  if (!(o.noise >= 0 && o.noise < 1)) throw std::invalid_argument("--noise must be in [0, 1)");
  if (o.noise > 0 && o.workers >= cores) {
    throw std::invalid_argument("--noise needs a core for the generator (workers < cores)");
  }
  return o;
}

overload_report run_overload(const overload_options& options, const std::function<void(const std::string&)>& progress) {
  overload_report rep;
  rep.options = resolve(options);
  const overload_options& o = rep.options;
  const run_setup setup = setup_of(o);
  rep.nominal_capacity_rps = static_cast<double>(o.workers) / to_seconds(o.service_time);
  // Everything below, capacity included, runs beside the hog: the capacity
  // is what is left to the workers.
  const cpu_noise noise(o.noise, o.noise_period, o.workers);
  if (o.noise > 0) {
    progress(fmt("noise: a hog takes %.0f%% of each worker core, in slices of %.1f ms", 100 * o.noise,
                 to_millis(o.noise_period)));
  }

  progress(fmt("capacity: closed loop, %zu worker(s), service time %.3f ms, budget %.3f ms ...", o.workers,
               to_millis(o.service_time), to_millis(o.budget)));
  rep.capacity_rps = measure_capacity(setup, o.capacity_length);
  progress(
      fmt("capacity: %.0f jobs/s (nominal workers/service time: %.0f)", rep.capacity_rps, rep.nominal_capacity_rps));

  std::uint64_t seed = o.seed;
  const std::size_t total = o.loads.size() * o.policies.size();
  for (double load : o.loads) {
    // Every policy gets the same arrivals at a load: a fair comparison.
    const std::uint64_t load_seed = seed++;
    for (const auto& policy : o.policies) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the previous run's threads go
      const time_point start = sclock::now() + std::chrono::milliseconds(5);
      arrival_plan plan{load * rep.capacity_rps, start, o.run_length, load_seed};
      auto ex = execute(policy, setup, poisson_schedule(plan), start + o.run_length);
      tally t = count(ex.slots, 0, ex.slots.size());
      run_result r;
      r.policy = policy;
      r.load = load;
      const double secs = to_seconds(o.run_length);
      r.nominal_rps = plan.rate;
      r.offered_rps = static_cast<double>(t.counts.offered) / secs;
      r.goodput_rps = static_cast<double>(t.counts.good) / secs;
      r.goodput_ratio = rep.capacity_rps > 0 ? r.goodput_rps / rep.capacity_rps : 0;
      r.busy_s = to_seconds(t.busy);
      r.wasted_s = to_seconds(t.wasted);
      r.wasted_work_ratio = t.busy > duration::zero() ? r.wasted_s / r.busy_s : 0;
      r.wasted_wall_ratio = t.busy_wall > duration::zero() ? to_seconds(t.wasted_wall) / to_seconds(t.busy_wall) : 0;
      r.p50_ms = ms(t.latency.value_at_quantile(0.5));
      r.p99_ms = ms(t.latency.value_at_quantile(0.99));
      r.p999_ms = ms(t.latency.value_at_quantile(0.999));
      r.max_ms = ms(t.latency.max_ns);
      r.counts = t.counts;
      r.send_lag_p99_ms = to_millis(ex.gen.lag_p99);
      r.send_lag_max_ms = to_millis(ex.gen.lag_max);
      r.send_ratio = ex.gen.send_ratio();
      r.valid = ex.gen.valid();
      rep.runs.push_back(r);
      progress(fmt("[%zu/%zu] %-9s x%-4g offered %8.0f/s  goodput %8.0f/s (%.3f)  wasted %5.1f%%  p99 %7.2f ms%s",
                   rep.runs.size(), total, policy.c_str(), load, r.offered_rps, r.goodput_rps, r.goodput_ratio,
                   100 * r.wasted_work_ratio, r.p99_ms, r.valid ? "" : "  INVALID (generator fell behind)"));
    }
  }

  // Measured again at the end: a large change means the machine's load
  // changed under the experiment, and the ratios above are suspect.
  rep.capacity_after_rps = measure_capacity(setup, o.capacity_length);
  progress(fmt("capacity after the runs: %.0f jobs/s (%+.1f%%)", rep.capacity_after_rps,
               100 * (rep.capacity_after_rps / rep.capacity_rps - 1)));

  if (o.step) {
    rep.step_bin_ms = to_millis(o.step_bin);
    const std::size_t phases = o.step_loads.size();
    rep.step_drop_s = to_seconds(o.step_phase) * static_cast<double>(phases > 1 ? phases - 1 : 0);
    const std::uint64_t step_seed = seed++;
    for (const auto& policy : o.policies) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const time_point start = sclock::now() + std::chrono::milliseconds(5);
      std::vector<time_point> schedule;
      for (std::size_t p = 0; p < phases; ++p) {
        arrival_plan plan{o.step_loads[p] * rep.capacity_rps, start + o.step_phase * static_cast<int>(p), o.step_phase,
                          step_seed + p};
        auto part = poisson_schedule(plan);
        schedule.insert(schedule.end(), part.begin(), part.end());
      }
      const time_point end = start + o.step_phase * static_cast<int>(phases);
      auto ex = execute(policy, setup, std::move(schedule), end);
      step_series s;
      s.policy = policy;
      s.valid = ex.gen.valid();
      const auto bins = static_cast<std::size_t>(std::ceil(to_seconds(end - start) / to_seconds(o.step_bin)));
      s.offered_rps.assign(bins, 0);
      s.goodput_rps.assign(bins, 0);
      const double per = 1.0 / to_seconds(o.step_bin);
      for (const auto& slot : ex.slots) {
        const auto a = static_cast<std::size_t>((slot.scheduled - start) / o.step_bin);
        if (a < bins) s.offered_rps[a] += per;
        if (slot.f == fate::good) {
          const auto d = static_cast<std::size_t>((slot.done - start) / o.step_bin);
          if (d < bins) s.goodput_rps[d] += per;
        }
      }
      if (std::getenv("HOURGLASS_BENCH_DEBUG") != nullptr) {
        for (std::size_t i = 0; i < ex.slots.size(); ++i) {
          const auto& sl = ex.slots[i];
          if (sl.f != fate::good && sl.scheduled >= start + o.step_phase * static_cast<int>(phases - 1)) {
            std::fprintf(
                stderr, "debug: %s arrival %.3f ms after drop fate %d run %.3f ms done %.3f ms after arrival\n",
                policy.c_str(), to_millis(sl.scheduled - (start + o.step_phase * static_cast<int>(phases - 1))),
                static_cast<int>(sl.f), to_millis(sl.run), to_millis(sl.done - sl.scheduled));
          }
        }
      }
      // Recovery: from the drop to the first arrival from which the next 10
      // arrivals (or all that remain) are all good: about two budgets' worth
      // of arrivals at 0.5x, long enough to show the backlog is gone, short
      // enough that a later Poisson burst (which sheds a few jobs at any
      // load) is not mistaken for a slow recovery.
      const time_point drop = start + o.step_phase * static_cast<int>(phases - 1);
      std::size_t first = 0;
      while (first < ex.slots.size() && ex.slots[first].scheduled < drop) ++first;
      constexpr std::size_t run_of_good = 10;
      std::size_t streak = 0;
      for (std::size_t i = first; i < ex.slots.size(); ++i) {
        if (ex.slots[i].f == fate::good) {
          if (++streak == std::min(run_of_good, ex.slots.size() - first)) {
            s.recovery_ms = to_millis(ex.slots[i + 1 - streak].scheduled - drop);
            break;
          }
        } else {
          streak = 0;
        }
      }
      if (!s.recovery_ms && streak > 0 && streak == ex.slots.size() - first) s.recovery_ms = 0;
      const tally after = count(ex.slots, first, ex.slots.size());
      s.goodput_after_drop_ratio =
          after.counts.offered ? static_cast<double>(after.counts.good) / static_cast<double>(after.counts.offered) : 0;
      const tally all = count(ex.slots, 0, ex.slots.size());
      s.wasted_work_ratio = all.busy > duration::zero() ? to_seconds(all.wasted) / to_seconds(all.busy) : 0;
      s.counts = all.counts;
      s.after_drop = after.counts;
      progress(fmt("[step] %-9s recovery after the drop: %s; good/offered after the drop %.3f%s", policy.c_str(),
                   s.recovery_ms ? fmt("%.1f ms", *s.recovery_ms).c_str() : "not within the phase",
                   s.goodput_after_drop_ratio, s.valid ? "" : "  INVALID (generator fell behind)"));
      rep.steps.push_back(std::move(s));
    }
  }
  return rep;
}

}  // namespace hourglass::bench
