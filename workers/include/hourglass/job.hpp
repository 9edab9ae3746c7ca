// What a caller gets back from a job: its one outcome, with the result and
// where the budget went.
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>

#include "hourglass/outcome.hpp"
#include "hourglass/time.hpp"

namespace hourglass {

// Where a job's budget went. Durations are measured on the executor's clock.
struct job_timings {
  duration budget = duration::max();                 // deadline - admission (max: no deadline)
  duration queue_delay = duration::zero();           // admission -> start (or -> drop)
  duration remaining_at_dispatch = duration::max();  // deadline - start (max: no deadline)
  duration run_time = duration::zero();              // start -> return (zero: never ran)
  bool ran = false;                                  // the job's function was called
  bool completed_late = false;                       // returned normally after its deadline: wasted work
  // It crossed a commit point (context::commit): whatever its outcome, a
  // change may have happened; reconcile by its idempotency key.
  bool committed = false;
};

// Thrown by job_result::value() when there is no value.
class job_failed : public std::runtime_error {
 public:
  explicit job_failed(status st) : std::runtime_error(std::string("hourglass job: ").append(describe(st))), st_(st) {}
  status why() const noexcept { return st_; }

 private:
  status st_;
};

// `void` jobs carry std::monostate.
template <class R>
using job_value_t = std::conditional_t<std::is_void_v<R>, std::monostate, R>;

template <class T>
struct job_result {
  status st;
  std::optional<T> result;   // set only when st is ok
  std::exception_ptr error;  // the handler's exception, when st is error
  job_timings timings;

  bool ok() const noexcept { return st.is_ok(); }
  // The result, or throws: the handler's own exception for `error`, job_failed otherwise.
  T& value() {
    if (st.is_ok() && result) return *result;
    if (error) std::rethrow_exception(error);
    throw job_failed(st);
  }
};

}  // namespace hourglass
