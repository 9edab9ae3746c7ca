// The executor's job records: what a submitted job is inside the executor,
// and the slabs they are carved from. Internal: included by executor.hpp,
// not part of the API.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

#include "hourglass/admission_queue.hpp"
#include "hourglass/context.hpp"
#include "hourglass/job.hpp"
#include "hourglass/metrics.hpp"

namespace hourglass {

namespace detail {

enum class job_state : std::uint8_t { queued, starting, running, done, cancelled_in_queue };

// Job records are carved from slabs, so a submit costs no malloc and a
// worker's release no free (a malloc on the submitter and a free on a worker
// per job was ~20 % of an empty job: glibc's arena lock and its bins). The
// submitter bump-allocates records from its current slab; each record holds
// its slab, and the slab is freed by whoever drops its last record. A slab
// is reference-counted on its own, so a record kept alive by a job_ref or
// job_handle stays valid after the executor is gone. A slab whose records
// are all gone is kept for reuse, up to 128 slabs (1 MiB) in the process
// (record_slab.cpp), and freed beyond that: memory is bounded by the live
// records (one slab per record kept, at worst), each executor's current
// slab, and that 1 MiB.
class record_slab {
 public:
  static constexpr std::size_t bytes = 8192;
  static constexpr std::size_t header = 64;
  static constexpr std::size_t line = 64;  // records never share a cache line
  static constexpr std::size_t max_record = 1024;

  static constexpr std::size_t rounded(std::size_t size) noexcept { return (size + line - 1) / line * line; }
  static constexpr bool fits(std::size_t size, std::size_t align) noexcept {
    return size <= max_record && align <= line;
  }

  // A record's last reference is gone (its object already destroyed).
  static void release(record_slab* s) noexcept {
    if (s->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) destroy(s);
  }

  // The submitters' side: bump allocation from the current slab.
  class carver {
   public:
    carver() = default;
    ~carver();
    carver(const carver&) = delete;
    carver& operator=(const carver&) = delete;
    // Room for `size` bytes (rounded(size) <= max_record), and the slab it is
    // in; nullptr when another submitter is carving (then use the heap).
    void* allocate(std::size_t size, record_slab*& slab) noexcept {
      if (busy_.exchange(true, std::memory_order_acquire)) return nullptr;
      const std::size_t need = rounded(size);
      if (current_ == nullptr || used_ + need > bytes) next_slab();
      void* p = nullptr;
      if (current_ != nullptr) {
        p = reinterpret_cast<char*>(current_) + used_;
        used_ += need;
        ++carved_;
        slab = current_;
        // The next record's lines, for writing: they were last written by a
        // worker on another core (or never), and waiting for them in the
        // store buffer was the submitter's largest stall in profiles of
        // `hourglass-bench throughput`.
        // A read prefetch would bring them in shared and the store would
        // still have to claim them: x86 needs PREFETCHW for that, which
        // older Intel cores lack (hence the CPU check).
        char* next = reinterpret_cast<char*>(current_) + used_;
        for (std::size_t off = 0; off < need && used_ + off < bytes; off += line) prefetch_for_write(next + off);
      }
      busy_.store(false, std::memory_order_release);
      return p;
    }

   private:
    void prefetch_for_write(const char* p) const noexcept {
#if defined(__x86_64__)
      if (prefetchw_) {
        asm volatile("prefetchw %0" : : "m"(*p));
        return;
      }
#endif
      __builtin_prefetch(p, 1);
    }
    static bool cpu_prefetches_for_write() noexcept;
    void next_slab() noexcept;  // retires the current slab, starts a new one (nullptr if out of memory)
    void* spare() noexcept;     // a slab's memory kept from one whose records are all gone; nullptr if none
    std::atomic<bool> busy_{false};
    const bool prefetchw_ = cpu_prefetches_for_write();
    void* spare_ = nullptr;  // spares taken from the process's list and not used yet
    record_slab* current_ = nullptr;
    std::size_t used_ = 0;
    std::uint32_t carved_ = 0;
  };

 private:
  // While a slab is current its count carries this bias, so releases can
  // never reach zero before the carver retires it and removes the bias.
  static constexpr std::uint32_t open_bias = 1u << 30;
  static void destroy(record_slab* s) noexcept;
  std::atomic<std::uint32_t> refs_{open_bias};
};

struct job_record : queued_job {
  virtual ~job_record() = default;
  // Runs the function; returns normally, or throws what it threw.
  virtual void invoke(const context* ctx) = 0;
  // Delivers the one outcome. Called exactly once.
  virtual void deliver(status st, const job_timings& t) noexcept = 0;
  virtual bool wants_context() const noexcept = 0;

  void add_ref() noexcept { refs.fetch_add(1, std::memory_order_relaxed); }
  void release() noexcept {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) dispose();
  }

  std::atomic<std::uint32_t> refs{0};  // held by job_refs and the queue, not by creation
  std::atomic<job_state> state{job_state::queued};
  handler_metrics* metrics = nullptr;
  duration run_limit = duration::max();
  duration reserve = duration::zero();
  duration idle_limit = duration::max();
  bool admitted_later = false;  // job_options::admitted_later
  std::optional<context> parent;
  std::optional<context_source> ctx;  // set before state becomes running
  std::exception_ptr error;           // the function's exception, for outcome error
  job_timings timings;
  record_slab* slab = nullptr;  // where the record lives; nullptr: a heap object of its own

 private:
  void dispose() noexcept {
    if (slab == nullptr) {
      delete this;
      return;
    }
    record_slab* s = slab;
    this->~job_record();
    record_slab::release(s);
  }
};

template <class F>
inline constexpr bool takes_context_v = std::is_invocable_v<F&, const context&>;

template <class F>
using fn_result_t = typename std::conditional_t<takes_context_v<F>, std::invoke_result<F&, const context&>,
                                                std::invoke_result<F&>>::type;

template <class F, class Done>
class job_impl final : public job_record {
 public:
  using R = fn_result_t<F>;
  using T = job_value_t<R>;

  job_impl(F&& f, Done&& d) : fn_(std::move(f)), done_(std::move(d)) {}

  void invoke(const context* ctx) override {
    if constexpr (takes_context_v<F>) {
      if constexpr (std::is_void_v<R>) {
        fn_(*ctx);
      } else {
        value_.emplace(fn_(*ctx));
      }
    } else {
      (void)ctx;
      if constexpr (std::is_void_v<R>) {
        fn_();
      } else {
        value_.emplace(fn_());
      }
    }
  }
  void deliver(status st, const job_timings& t) noexcept override {
    job_result<T> r{st, {}, {}, t};
    if (st.is_ok()) {  // only a run that returned normally is ok
      if constexpr (std::is_void_v<R>) {
        r.result.emplace();
      } else {
        r.result = std::move(value_);
      }
    }
    if (st.code == outcome::error) r.error = error;
    done_(std::move(r));
  }
  bool wants_context() const noexcept override { return takes_context_v<F>; }

 private:
  // A void job's value is its ok status: nothing stored. With an empty
  // function that keeps a job whose callback holds one pointer in three
  // cache lines rather than four (each line is a miss to the submitter that
  // writes it and to the worker that reads it).
  struct no_value {};
  [[no_unique_address]] F fn_;
  Done done_;
  [[no_unique_address]] std::conditional_t<std::is_void_v<R>, no_value, std::optional<T>> value_;
};

struct adopt_ref_t {};
inline constexpr adopt_ref_t adopt_ref{};

struct record_ref {
  job_record* p = nullptr;
  record_ref() = default;
  explicit record_ref(job_record* r) noexcept : p(r) {
    if (p) p->add_ref();
  }
  // Takes over a reference already counted (a new record starts with its refs set).
  record_ref(job_record* r, adopt_ref_t) noexcept : p(r) {}
  record_ref(const record_ref& o) noexcept : record_ref(o.p) {}
  record_ref(record_ref&& o) noexcept : p(std::exchange(o.p, nullptr)) {}
  record_ref& operator=(record_ref o) noexcept {
    std::swap(p, o.p);
    return *this;
  }
  ~record_ref() {
    if (p) p->release();
  }
};

}  // namespace detail

}  // namespace hourglass
