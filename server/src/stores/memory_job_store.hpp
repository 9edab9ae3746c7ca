// The memory job store (core/job_store.hpp, make_memory_job_store): async
// jobs in this process's memory (memory_jobs), run on its executor. Its
// methods are in two files: memory_job_store.cpp (jobs in and out, attempts
// and their ends, retries) and memory_job_waits.cpp (a run that ended
// waiting, for its children or a person: its timers and its resumption).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/core.hpp"
#include "core/job_store.hpp"
#include "stores/memory_fires.hpp"
#include "stores/memory_jobs.hpp"

namespace hourglass::server::detail {

// Timers of attempts due later (retries, delayed jobs, waits) on the
// daemon's clock, and whether the store still lives to act on them: the
// destructor cancels them all and shuts the gate, so a timer firing
// meanwhile does nothing.
// Recursive: an attempt submitted under it may end at once (refused), and
// its end may resume a waiting parent, which takes it again.
struct attempt_timers {
  std::recursive_mutex mu;
  bool open = true;
  std::map<std::string, timer_id> by_job;
};

class memory_job_store final : public job_store {
 public:
  explicit memory_job_store(core& c)
      : c_(c),
        jobs_(c.opts.async_max_jobs, c.opts.async_ttl,
              {.family = {c.opts.max_job_depth, c.opts.max_children},
               .idempotency_ttl = c.opts.idempotency_ttl,
               .max_result_bytes = c.opts.async_max_result_bytes,
               .max_scheduled = c.opts.async_max_scheduled}),
        timers_(std::make_shared<attempt_timers>()) {}

  ~memory_job_store() override;

  // Stores the job and submits its first attempt: it may start by
  // headers_at + freshness and runs at most its handler's run_limit.
  void create(new_job job, callback<created> done) override;

  void find(std::string id, callback<found> done) override;
  void cancel(std::string id, cancel_cause cause, callback<found> done) override;

  // A person's signal: the job runs again with the machine budget it had
  // left when it began to wait (its deadline moved on by the wait).
  void signal(std::string id, std::string name, std::string payload, callback<signal_result> done) override;

  void queue_state(queue_action a, callback<queue_answer> done) override;
  void list(list_request q, callback<job_page> done) override;

  // A schedule's fires, settled in this process only (memory_fires): lost
  // on a restart as every memory job is.
  void tick_schedule(const schedule& s, callback<schedule_tick> done) override;

  // The table's size against its bound: what a soak watches for growth.
  void write_metrics(exposition_writer& w) const override;

 private:
  // What every attempt of one job shares.
  struct job_run {
    std::string id;
    new_job job;
  };

  // A child job: its parent held and not finished, and its whole deadline
  // no later than the parent's less --call-reserve (the refusal otherwise).
  std::optional<created> under_parent(new_job& job, time_point now);

  // When a new job's first attempt is due: after its Job-Delay, or at its
  // Job-Not-Before (a wall-clock time: how far ahead is read on the system
  // clock, the wait on the daemon's).
  static time_point due_time(const new_job& job, time_point now);

  // How a run comes to be submitted: the first attempt, for the caller
  // answered now; a later attempt (a delay or a retry come due, a child's
  // first); a run resumed after its wait (children, a wake time, a signal).
  enum class run_start { answered, later, resumed };

  // Submits a run that became due at `due`: it may start by due + freshness
  // (and before the job's overall deadline). Every run but the one create()
  // submits for a caller comes after the caller's answer: admitted_later. A
  // resumed run is admitted work continuing: no minimum budget and no
  // predicted wait judge it (its wake kept that budget for it), as the
  // fleet's scripts put it straight back on the stream with min_budget_ms 0.
  // The refusal when the executor refused a first attempt at admission (its
  // record is then gone: no 202 was sent); a retry refused so is finished
  // with it.
  std::optional<status> submit_attempt(const std::shared_ptr<const job_run>& run, time_point due,
                                       run_start start = run_start::later);

  // An attempt ended: a retry when the policy and the job's deadline allow
  // one (job_retry.hpp), else the job's outcome.
  void on_attempt_end(const std::shared_ptr<const job_run>& run, job_result<handler_result>&& r) noexcept;

  // The run ended by waiting for its children: the worker is free; the job
  // runs again when they are done (a child's finish names it through
  // take_woken) or at its wake time, whichever comes first.
  void wait_for_children(const std::shared_ptr<const job_run>& run, fan_in f);

  // The run ended waiting for a person: the worker is free, the machine
  // budget stands still; the signal resumes it (signal()), or the wait's
  // own limit ends it, deadline_exceeded/human_wait.
  void wait_for_signal(const std::shared_ptr<const job_run>& run, const signal_wait& w);

  // A run that ended waiting, as the table judged it (under timers_->mu):
  // waiting (kept to be resumed, its timer armed), resumed at once, or
  // ended cancelled (a DELETE came while it ran).
  void settle_wait(const std::shared_ptr<const job_run>& run, memory_jobs::wait_verdict v, time_point now,
                   cancel_cause cause, const std::function<void()>& arm_timer);

  // At its limit a person's wait ends the job, deadline_exceeded/human_wait
  // (counted and logged as its outcome: no executor run ends it).
  void arm_human_limit(const std::shared_ptr<const job_run>& run, time_point limit_at);

  // At its wake time the wait ends with what has finished.
  void arm_wake(const std::shared_ptr<const job_run>& run, time_point at);

  // Jobs a cancel ended in the table (scheduled, waiting): no executor run
  // ends them, so their outcomes are counted and logged here.
  void count_ended_in_table(const std::vector<memory_jobs::ended_in_table>& ended);

  // A parent's wait is over (its rule met, or its wake time come): children
  // still unfinished are cancelled now, cause parent. Nobody waits for them,
  // and one holding a worker would hold back the resumed run that needs it.
  void cancel_unfinished_children(const std::string& parent, time_point now);

  // Submits the parents whose children's outcomes ended their wait.
  void resume_woken();

  // Waits a cancel ended (the parent's own, or its parent's): nothing will resume them.
  void forget_ended_waits();

  // At `due`, on the daemon's clock, the next attempt is submitted.
  void arm_attempt(const std::shared_ptr<const job_run>& run, time_point due);

  static found found_of(const std::optional<async_record>& r, time_point now);

  core& c_;
  memory_jobs jobs_;
  memory_fires fires_{c_.clk};
  std::shared_ptr<attempt_timers> timers_;

  // Parents waiting for their children, to be submitted again (under timers_->mu).
  std::map<std::string, std::shared_ptr<const job_run>, std::less<>> waiting_;
};

}  // namespace hourglass::server::detail
