// The bridge from a hourglass context to Boost.Asio per-operation cancellation.
//
// Boost 1.81 ships Asio 1.26: it has cancellation_signal / cancellation_slot,
// but no cancel_after. asio_cancellation turns "the context stopped" (cancel,
// or its deadline reached on its clock) into `signal.emit(cancellation_type::all)`
// on the executor that owns the operations, so a job's pending timer wait,
// connect, read or write completes at once with operation_aborted.
//
//   auto strand = asio::make_strand(io);
//   asio::steady_timer timer(strand, 1h);
//   hourglass::asio_cancellation stop(ctx, strand);       // after the I/O object
//   asio::post(strand, [&] {
//     timer.async_wait(asio::bind_cancellation_slot(stop.slot(), on_done));
//     stop.emit_if_stopped();                              // see "Ordering"
//   });
//   ... wait for on_done; destroy `stop` before `timer` ...
//
// Contract:
//  - The emit is *posted* to the executor given at construction (Asio requires
//    a signal to be emitted on the executor that runs its operations; a
//    strand for sockets and timers shared between threads).
//  - Ordering: a stop that happens before an operation is bound to slot() is
//    remembered. Call emit_if_stopped() on the executor right after binding
//    (initiating) operations: it emits again if the stop came first. Without
//    it, an operation initiated after the stop is not aborted.
//  - One operation at a time may be bound to slot() (an Asio slot holds one
//    handler); a composed operation such as beast::http::async_read passes it
//    on to each inner operation in turn, which is fine.
//  - Lifetime: destroy the binding after its bound operations have completed
//    (or from the executor) and before the I/O objects they ran on; declaring
//    it after them does that. The destructor deregisters from the context
//    (waiting for a callback running on another thread) and disconnects the
//    slot. An emit already posted keeps the shared state alive and does
//    nothing once the binding is gone: Asio does not clear a slot when its
//    operation completes, so a late emit would otherwise reach a destroyed
//    I/O object.
//  - The executor's execution context (io_context) must outlive the binding.
//
// Thread safety: construct, use and destroy from one thread at a time;
// stop_requested() may be called from any thread. Stops may arrive on any
// thread (the context's timer thread, a canceller).
#pragma once

#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <mutex>
#include <utility>

#include "hourglass/cancellation.hpp"
#include "hourglass/context.hpp"

namespace hourglass {

template <class Executor>
class asio_cancellation {
 public:
  asio_cancellation(const context& ctx, Executor ex)
      : token_(ctx.token()), state_(std::make_shared<shared>(std::move(ex))), callback_(token_, poster{state_}) {}

  ~asio_cancellation() {
    std::lock_guard lock(state_->mu);
    state_->closed = true;
    state_->signal.slot().clear();
  }

  asio_cancellation(const asio_cancellation&) = delete;
  asio_cancellation& operator=(const asio_cancellation&) = delete;

  // Bind operations to this with boost::asio::bind_cancellation_slot.
  boost::asio::cancellation_slot slot() noexcept { return state_->signal.slot(); }

  // On the executor, after initiating bound operations: aborts them if the
  // context stopped before they were bound.
  void emit_if_stopped() {
    std::lock_guard lock(state_->mu);
    if (state_->fired && !state_->closed) state_->signal.emit(boost::asio::cancellation_type::all);
  }

  bool stop_requested() const noexcept { return token_.stop_requested(); }
  const Executor& get_executor() const noexcept { return state_->ex; }

 private:
  struct shared {
    explicit shared(Executor e) : ex(std::move(e)) {}
    Executor ex;
    std::mutex mu;  // serialises emit with the destructor's disconnect
    boost::asio::cancellation_signal signal;
    bool fired = false;   // a stop reached the executor
    bool closed = false;  // the binding is gone: emit nothing
    void emit() {
      std::lock_guard lock(mu);
      fired = true;
      if (!closed) signal.emit(boost::asio::cancellation_type::all);
    }
  };

  // Runs on the thread that stops the context: never emit there, post.
  struct poster {
    std::shared_ptr<shared> s;
    void operator()() noexcept {
      try {
        boost::asio::post(s->ex, [st = s] { st->emit(); });
      } catch (...) {
        // Out of memory while posting: the operation then runs to its own end.
      }
    }
  };

  cancellation_token token_;
  std::shared_ptr<shared> state_;
  cancellation_callback<poster> callback_;  // last: deregistered first
};

template <class Executor>
asio_cancellation(const context&, Executor) -> asio_cancellation<Executor>;

}  // namespace hourglass
