// The bodies of executor's member templates (Asio's impl/ layout): included
// at the end of executor.hpp. Included first, it brings executor.hpp in
// itself, so it still compiles alone.
#pragma once

#include "hourglass/executor.hpp"

namespace hourglass {

template <class F, class Done>
job_ref executor::submit(const job_options& opts, F&& fn, Done&& on_done) {
  using Fn = std::decay_t<F>;
  using D = std::decay_t<Done>;
  using T = job_value_t<detail::fn_result_t<Fn>>;
  handler_metrics& h = resolve(opts);
  const time_point now = fast_now(*clock_, fast_clock_span);
  const job_bounds bounds = bounds_of(opts);
  if (const status early = precheck(opts, bounds, now); !early.is_ok()) {
    note_rejected(h, early);
    on_done(job_result<T>{early, {}, {}, rejected_timings(opts, now)});
    return job_ref();
  }
  using Impl = detail::job_impl<Fn, D>;
  Impl* rec;
  void* place = nullptr;
  detail::record_slab* slab = nullptr;
  if constexpr (detail::record_slab::fits(sizeof(Impl), alignof(Impl))) place = carver_.allocate(sizeof(Impl), slab);
  if (place != nullptr) {
    try {
      rec = ::new (place) Impl(Fn(std::forward<F>(fn)), D(std::forward<Done>(on_done)));
    } catch (...) {
      detail::record_slab::release(slab);
      throw;
    }
    rec->slab = slab;
  } else {
    rec = new Impl(Fn(std::forward<F>(fn)), D(std::forward<Done>(on_done)));
  }
  prepare(*rec, opts, bounds, h);
  // One reference for the returned job_ref, one for the queue: set, not counted up.
  rec->refs.store(2, std::memory_order_relaxed);
  job_ref ref(rec, detail::adopt_ref);
  if (opts.run_here_when_idle) {
    if (worker_slot* guest = borrow_idle_worker()) {
      run_here(rec, now, guest);
      return ref;
    }
  }
  admit(rec, now);
  return ref;
}

template <class F>
auto executor::submit(const job_options& opts, F&& fn) {
  using Fn = std::decay_t<F>;
  using T = job_value_t<detail::fn_result_t<Fn>>;
  auto promise = std::make_shared<std::promise<job_result<T>>>();
  auto future = promise->get_future();
  job_ref ref = submit(opts, std::forward<F>(fn),
                       [promise](job_result<T>&& r) noexcept { promise->set_value(std::move(r)); });
  job_handle<T> handle;
  handle.rec_ = std::move(ref.rec_);
  handle.future_ = std::move(future);
  return handle;
}

}  // namespace hourglass
