// The pieces every asynchronous job_queue call is made of: a failed call's
// error as the exception its blocking form throws, answers as values, and
// the blocking form itself (waiting for the asynchronous one). Internal to
// fleet/.
#pragma once

#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "broker_error.hpp"
#include "hourglass/fleet/job_queue.hpp"

namespace hourglass::fleet::detail {

// The exception broker_error would throw, as a value.
inline std::exception_ptr broker_error_ptr(const std::string& what, const redis_reply& r) {
  try {
    broker_error(what, r);
  } catch (...) {
    return std::current_exception();
  }
}

// A script call answered with an error reply: redis_refused, with its text.
inline std::exception_ptr script_refused_ptr(const redis_reply& r) {
  return std::make_exception_ptr(redis_refused("redis: script: " + r.str));
}

// What a failed call would have thrown; nullptr when it has a reply.
inline std::exception_ptr error_of(const redis_result& r) {
  switch (r.result) {
    case redis_result::code::ok: return nullptr;
    case redis_result::code::unavailable: return std::make_exception_ptr(redis_unavailable(r.message));
    case redis_result::code::stopped: return std::make_exception_ptr(stopped_error(r.stop_status));
  }
  return std::make_exception_ptr(redis_unavailable("redis: unreachable"));
}

// A fresh exception like `e`'s, for one of several callers that share an
// error (an enqueue batch): each may rethrow its own on its own thread, and
// no exception object, nor its message's string, is freed by whichever
// caller lets go last.
inline std::exception_ptr own_copy(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const stopped_error& s) {
    return std::make_exception_ptr(stopped_error(s.why()));
  } catch (const redis_refused& r) {
    return std::make_exception_ptr(redis_refused(std::string(r.what())));
  } catch (const redis_unavailable& u) {
    return std::make_exception_ptr(redis_unavailable(std::string(u.what())));
  } catch (...) {
    return e;
  }
}

template <class T>
async_answer<T> failed(std::exception_ptr e) {
  async_answer<T> a;
  a.error = std::move(e);
  return a;
}

template <class T>
async_answer<T> answer(T value) {
  async_answer<T> a;
  a.value = std::move(value);
  return a;
}

// Runs `start(done)` and waits for `done`: the blocking form of an async call.
template <class T, class Start>
T wait_for(Start&& start) {
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<async_answer<T>> a;
  };
  auto w = std::make_shared<waiter>();
  start([w](async_answer<T> a) {
    std::lock_guard lock(w->mu);
    w->a = std::move(a);
    w->cv.notify_all();
  });
  async_answer<T> a;
  {
    std::unique_lock lock(w->mu);
    w->cv.wait(lock, [&] { return w->a.has_value(); });
    a = std::move(*w->a);
  }
  // Taken out under the lock: the error's last reference is dropped on this
  // thread, never by the callback's owner on an I/O thread afterwards.
  if (a.error) std::rethrow_exception(std::move(a.error));
  return std::move(a.value);
}

}  // namespace hourglass::fleet::detail
