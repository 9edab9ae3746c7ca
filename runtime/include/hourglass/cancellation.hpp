// Cancellation: observing and requesting are separate rights.
//
//  - cancellation_source: held by owners; request_stop() records a reason.
//  - cancellation_token: handed to work; observes only. A default-constructed
//    token can never fire and says so (stop_possible() == false): a fast path.
//  - cancellation_callback: RAII registration of a function to run when the
//    source stops.
//
// Contract (as C++20 std::stop_callback, Seastar abort_source, libunifex):
//  - The first reason wins; later requests return false and change nothing.
//  - A callback runs at most once: on the thread that requested the stop, or
//    at once in the constructor when the source had already stopped.
//  - Callbacks must not throw (they are invoked from noexcept code).
//  - Destroying a callback deregisters it (no leak). If it is running on
//    another thread at that moment, the destructor waits for it to return; if
//    it is running on this thread (a callback destroying itself), it does not.
//
// Thread safety: all operations may be called concurrently from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "hourglass/outcome.hpp"

namespace hourglass {

namespace detail {

struct callback_node {
  void (*invoke)(callback_node*) noexcept = nullptr;
  callback_node* prev = nullptr;
  callback_node* next = nullptr;
  bool linked = false;
  bool* destroyed_while_running = nullptr;
};

class cancellation_state {
 public:
  bool stop_requested() const noexcept { return reason_.load(std::memory_order_acquire) != 0; }
  status reason() const noexcept { return unpack(reason_.load(std::memory_order_acquire)); }

  // Returns true when this call made the stop (first reason wins).
  bool request_stop(status why) noexcept;
  // Returns false when already stopped (the caller then runs the callback itself).
  bool add(callback_node* node) noexcept;
  void remove(callback_node* node) noexcept;

  std::size_t registered_callbacks() const noexcept;  // for leak tests

 private:
  static std::uint32_t pack(status s) noexcept;
  static status unpack(std::uint32_t v) noexcept;

  std::atomic<std::uint32_t> reason_{0};
  mutable std::mutex mu_;
  std::condition_variable done_running_;
  callback_node* head_ = nullptr;
  callback_node* running_ = nullptr;
  std::thread::id firing_thread_;
  std::size_t count_ = 0;
};

}  // namespace detail

class cancellation_token {
 public:
  cancellation_token() = default;
  explicit cancellation_token(std::shared_ptr<detail::cancellation_state> s) noexcept : state_(std::move(s)) {}

  bool stop_possible() const noexcept { return state_ != nullptr; }
  bool stop_requested() const noexcept { return state_ && state_->stop_requested(); }
  // status::ok() while not stopped; otherwise cancelled/cause or deadline_exceeded.
  status reason() const noexcept { return state_ ? state_->reason() : status::ok(); }

 private:
  template <class F>
  friend class cancellation_callback;
  std::shared_ptr<detail::cancellation_state> state_;
};

class cancellation_source {
 public:
  cancellation_source() : state_(std::make_shared<detail::cancellation_state>()) {}

  // A stop reason must not be `ok`; `cancelled(requested)` is the plain cancel.
  bool request_stop(status why = status::cancelled(cancel_cause::requested)) noexcept {
    // A callback may free the object that holds this source (a context whose
    // last owner lets go inside its own stop): keep the state alive until
    // the stop has run.
    const auto keep = state_;
    return keep->request_stop(why);
  }
  bool stop_requested() const noexcept { return state_->stop_requested(); }
  status reason() const noexcept { return state_->reason(); }
  cancellation_token token() const noexcept { return cancellation_token(state_); }
  std::size_t registered_callbacks() const noexcept { return state_->registered_callbacks(); }

 private:
  std::shared_ptr<detail::cancellation_state> state_;
};

template <class F>
class cancellation_callback {
  // What can be checked at compile time: F is called with no arguments. "Must
  // not throw" cannot be: std::function<void()>, which type-erasing callers
  // (and the tests) use, is never nothrow-invocable. A callback that throws
  // anyway reaches the noexcept invoke() below, so std::terminate, not UB.
  static_assert(std::is_invocable_v<F&>, "a cancellation callback is called with no arguments");

 public:
  template <class G>
  cancellation_callback(const cancellation_token& token, G&& fn) : state_(token.state_), fn_(std::forward<G>(fn)) {
    node_.invoke = &cancellation_callback::invoke;
    if (state_ && !state_->add(&node_)) {
      state_.reset();
      fn_();
    }
  }
  ~cancellation_callback() {
    if (state_) state_->remove(&node_);
  }
  cancellation_callback(const cancellation_callback&) = delete;
  cancellation_callback& operator=(const cancellation_callback&) = delete;

 private:
  struct node_type : detail::callback_node {
    cancellation_callback* self;
  };
  static void invoke(detail::callback_node* n) noexcept { static_cast<node_type*>(n)->self->fn_(); }

  std::shared_ptr<detail::cancellation_state> state_;
  F fn_;
  node_type node_{{}, this};
};

template <class F>
cancellation_callback(const cancellation_token&, F) -> cancellation_callback<F>;

}  // namespace hourglass
