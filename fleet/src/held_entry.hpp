// One stream entry this daemon holds, from its delivery until its outcome is
// written, it is handed back to the fleet, or it is left to the fleet with
// nothing from us: a state machine, in the shape of the daemon's sync call
// (server/src/http/request_rules.hpp). The consumer's threads (the reader, the
// executor's workers, the renewer, the writer, drain) feed it events under
// the consumer's lock and do the action each returns. Pure: no threads, no
// Redis, no clock (tests/fleet/held_entry_test.cpp).
//
// Facts of the delivery stay beside the state, in the consumer: whether it
// was reclaimed from a dead holder (late is then stage reclaim) and whether
// its entry was deleted from the stream (then it is not renewed).
#pragma once

namespace hourglass::fleet::detail {

enum class held_state {
  queued,        // delivered: in our executor (or on its way), the start script has not said run
  running,       // the start script said run: its handler runs (or its context stopped first)
  giving_back,   // drained before it started: its job is being stopped, then it goes back
  leaving,       // fenced, or another daemon holds it now: its job is being stopped; nothing from us
  writing,       // its outcome waits for the writer
  handing_back,  // waits for the writer to hand it back (idle past any lease, delivery uncounted)
  done,          // nothing left to do: forgotten
};

enum class held_event {
  submitted,       // the executor took its job: the handle is here
  start_said_run,  // the start script said run, and it is still fresh enough to start
  job_ended,       // our executor is done with its job
  outcome_ready,   // settle() (or the freshness check at delivery) gave it an outcome of ours
  refused,         // settle(): not the job's outcome (refused by our executor): back to the fleet
  nothing_ours,    // settle(): nothing from us (the start script recorded it, or it is not ours)
  drain_began,     // drain: reading stopped, jobs not started go back
  drain_deadline,  // drain's deadline: the rest go back now, running or not
  fenced,          // no renewal for most of a lease, or another process took the name
  lost,            // a renewal: another daemon holds it now
  delete_marked,   // a renewal: a DELETE marked its job
  written,         // the writer recorded its outcome (the first, or a duplicate)
  handed_back,     // the writer handed it back
  dropped,         // too many outcomes wait for the broker: its own is dropped, the fleet reclaims it
};

enum class held_action {
  none,
  run_handler,         // run the handler (unless its context stopped meanwhile)
  settle,              // ask settle() what the job's result becomes, and feed its answer
  stop,                // cancel its job, cause shutdown
  stop_requested,      // cancel its job, cause requested: its outcome is cancelled/requested
  write,               // queue its outcome for the writer
  hand_back,           // queue it for the writer to hand back
  hand_back_and_stop,  // both at once: another daemon may run it while ours stops
  leave,               // forget it, nothing from us: left to reclaim, recorded by the start script, or another's
  forget,              // forget it: the writer is done with it (or dropped its outcome)
};

struct held_step {
  held_state next;
  held_action action;
};

// Its job is in our executor: its handle is worth keeping, and it takes one
// of the consumer's slots (reading waits for room).
constexpr bool holds_job(held_state s) noexcept {
  return s == held_state::queued || s == held_state::running || s == held_state::giving_back ||
         s == held_state::leaving;
}

// Its renewal keeps it ours: it may still end in an outcome of ours. (Not
// handing_back: renewing it would undo the hand-back's idle time.)
constexpr bool renewed(held_state s) noexcept {
  return s == held_state::queued || s == held_state::running || s == held_state::writing;
}

constexpr held_step on_held_event(held_state s, held_event e) noexcept {
  using st = held_state;
  using ev = held_event;
  using act = held_action;
  switch (s) {
    case st::queued:
    case st::running:
      switch (e) {
        case ev::submitted: break;  // keep the handle
        case ev::start_said_run:
          return s == st::queued ? held_step{st::running, act::run_handler} : held_step{s, act::none};
        case ev::job_ended: return {s, act::settle};
        case ev::outcome_ready: return {st::writing, act::write};
        case ev::refused: return {st::handing_back, act::hand_back};
        case ev::nothing_ours: return {st::done, act::leave};
        // A running job may finish until the drain's deadline.
        case ev::drain_began: return s == st::queued ? held_step{st::giving_back, act::stop} : held_step{s, act::none};
        case ev::drain_deadline: return {st::handing_back, act::hand_back_and_stop};
        case ev::fenced:
        case ev::lost: return {st::leaving, act::stop};
        case ev::delete_marked: return {s, act::stop_requested};
        case ev::written:
        case ev::handed_back:
        case ev::dropped: break;
      }
      break;
    case st::giving_back:
      switch (e) {
        case ev::submitted: return {s, act::stop};  // drained before its handle was here
        case ev::job_ended:
        case ev::drain_deadline: return {st::handing_back, act::hand_back};  // ended, or stopped and not ended yet
        default: break;  // going back whatever happens: not started, not stopped twice, not fenced
      }
      break;
    case st::leaving:
      switch (e) {
        case ev::submitted: return {s, act::stop};  // fenced or lost before its handle was here
        case ev::job_ended: return {st::done, act::leave};
        default: break;  // no outcome from us, whatever its job says
      }
      break;
    case st::writing:
      // Its outcome was decided before a fence, a loss or a drain: the
      // finish records it unless another's came first.
      if (e == ev::written || e == ev::dropped) return {st::done, act::forget};
      break;
    case st::handing_back:
      if (e == ev::handed_back) return {st::done, act::forget};
      break;
    case st::done: break;
  }
  return {s, act::none};
}

}  // namespace hourglass::fleet::detail
