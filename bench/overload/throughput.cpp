#include "overload/throughput.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

#include "hourglass/executor.hpp"
#ifdef HOURGLASS_BENCH_TBB
#include <tbb/task_arena.h>
#endif
#include <concurrentqueue/blockingconcurrentqueue.h>

namespace hourglass::bench {

namespace {

using sclock = std::chrono::steady_clock;

// Counts completions; the submitter waits for the last one.
class finish_line {
 public:
  explicit finish_line(std::size_t n) : target_(n) {}
  void hit() noexcept {
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == target_) {
      std::lock_guard lock(mu_);
      finished_ = true;
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return finished_; });
  }

 private:
  std::size_t target_;
  std::atomic<std::size_t> done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
};

template <class Body>
double timed(std::size_t jobs, Body&& body) {
  const auto t0 = sclock::now();
  body();
  const auto t1 = sclock::now();
  return static_cast<double>(jobs) / std::chrono::duration<double>(t1 - t0).count();
}

double run_hourglass(std::size_t workers, std::size_t jobs) {
  executor_options o;
  o.workers = workers;
  o.queue_capacity = jobs + 64;  // the submitter never meets queue_full
  executor ex(o);
  handler_metrics* h = &ex.handler("throughput");
  finish_line line(jobs);
  job_options jo;
  jo.metrics = h;
  const double rate = timed(jobs, [&] {
    for (std::size_t i = 0; i < jobs; ++i) {
      ex.submit(
          jo, [] {}, [&line](job_result<std::monostate>&&) noexcept { line.hit(); });
    }
    line.wait();
  });
  ex.shutdown();
  return rate;
}

double run_moodycamel(std::size_t workers, std::size_t jobs) {
  moodycamel::BlockingConcurrentQueue<std::function<void()>> q(jobs + 64);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (std::size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      std::function<void()> fn;
      while (!stop.load(std::memory_order_relaxed)) {
        if (q.wait_dequeue_timed(fn, std::chrono::milliseconds(50))) fn();
      }
    });
  }
  finish_line line(jobs);
  moodycamel::ProducerToken tok(q);
  const double rate = timed(jobs, [&] {
    for (std::size_t i = 0; i < jobs; ++i) q.enqueue(tok, [&line] { line.hit(); });
    line.wait();
  });
  stop.store(true);
  for (auto& t : threads) t.join();
  return rate;
}

double run_asio(std::size_t workers, std::size_t jobs) {
  boost::asio::thread_pool pool(workers);
  finish_line line(jobs);
  const double rate = timed(jobs, [&] {
    for (std::size_t i = 0; i < jobs; ++i) boost::asio::post(pool, [&line] { line.hit(); });
    line.wait();
  });
  pool.join();
  return rate;
}

class mutex_pool {
 public:
  explicit mutex_pool(std::size_t workers) {
    for (std::size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { loop(); });
  }
  ~mutex_pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void post(std::function<void()> fn) {
    {
      std::lock_guard lock(mu_);
      q_.push_back(std::move(fn));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !q_.empty(); });
      if (q_.empty()) return;
      auto fn = std::move(q_.front());
      q_.pop_front();
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> q_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

double run_mutex(std::size_t workers, std::size_t jobs) {
  mutex_pool pool(workers);
  finish_line line(jobs);
  return timed(jobs, [&] {
    for (std::size_t i = 0; i < jobs; ++i) pool.post([&line] { line.hit(); });
    line.wait();
  });
}

}  // namespace

#ifdef HOURGLASS_BENCH_TBB
// oneTBB's fire-and-forget submission: an arena of `workers` threads, none
// reserved for the submitter (it only enqueues, as with the other pools).
double run_tbb(std::size_t workers, std::size_t jobs) {
  tbb::task_arena arena(static_cast<int>(workers), 0);
  arena.initialize();
  finish_line line(jobs);
  return timed(jobs, [&] {
    for (std::size_t i = 0; i < jobs; ++i) arena.enqueue([&line] { line.hit(); });
    line.wait();
  });
}
#endif

throughput_report run_throughput(const throughput_options& options,
                                 const std::function<void(const std::string&)>& progress) {
  throughput_report r;
  r.workers = options.workers;
  if (r.workers == 0) r.workers = std::max(1u, std::thread::hardware_concurrency()) - 1;
  if (r.workers == 0) r.workers = 1;
  r.jobs = std::max<std::size_t>(1, options.jobs);
  r.rounds = std::max(1, options.rounds);
  // Interleaved rounds: a burst of noise from a neighbour hurts one round of
  // one pool, not every round of it; the best round of each is compared.
  for (int round = 0; round < r.rounds; ++round) {
    auto wanted = [&](const char* name) {
      return options.pools.empty() ||
             std::find(options.pools.begin(), options.pools.end(), name) != options.pools.end();
    };
    r.hourglass_rounds.push_back(wanted("hourglass") ? run_hourglass(r.workers, r.jobs) : 0);
    r.moodycamel_rounds.push_back(wanted("moodycamel") ? run_moodycamel(r.workers, r.jobs) : 0);
    r.asio_rounds.push_back(wanted("asio") ? run_asio(r.workers, r.jobs) : 0);
    r.mutex_rounds.push_back(wanted("mutex") ? run_mutex(r.workers, r.jobs) : 0);
#ifdef HOURGLASS_BENCH_TBB
    r.tbb_rounds.push_back(wanted("tbb") ? run_tbb(r.workers, r.jobs) : 0);
#else
    r.tbb_rounds.push_back(0);
#endif
    char line[256];
    std::snprintf(line, sizeof line,
                  "round %d/%d: hourglass %.0f/s  moodycamel %.0f/s  asio %.0f/s  mutex %.0f/s  tbb %.0f/s", round + 1,
                  r.rounds, r.hourglass_rounds.back(), r.moodycamel_rounds.back(), r.asio_rounds.back(),
                  r.mutex_rounds.back(), r.tbb_rounds.back());
    progress(line);
  }
  auto best = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
  r.hourglass = best(r.hourglass_rounds);
  r.moodycamel = best(r.moodycamel_rounds);
  r.asio = best(r.asio_rounds);
  r.mutex = best(r.mutex_rounds);
  r.tbb = best(r.tbb_rounds);
  return r;
}

}  // namespace hourglass::bench
