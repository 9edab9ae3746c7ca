// Where an async job is in its life: the names the job object, the
// listings and both stores use (docs/reference/http-api.md, "The job
// object"), and the listing's filters over them. The fleet's scripts spell
// the same names on the broker (fleet/lua/lib/states.lua); a test holds
// the two to one list (tests/fleet/job_states_test.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "hourglass/outcome.hpp"

namespace hourglass::jobs {

enum class job_state : std::uint8_t {
  queued,     // admitted: waits for a worker
  running,    // a worker runs its attempt
  scheduled,  // waits for its due time: a delay, or a retry's backoff
  waiting,    // its run ended waiting: for its children, or for a person's signal
  // Its outcome (final):
  ok,
  error,
  deadline_exceeded,
  cancelled,
  rejected,
  dead,  // fleet: dead-lettered after its workers kept dying (an operator may replay it)
};

inline constexpr std::array<job_state, 10> all_job_states = {
    job_state::queued, job_state::running,           job_state::scheduled, job_state::waiting,  job_state::ok,
    job_state::error,  job_state::deadline_exceeded, job_state::cancelled, job_state::rejected, job_state::dead};

constexpr std::string_view to_string(job_state s) noexcept {
  switch (s) {
    case job_state::queued: return "queued";
    case job_state::running: return "running";
    case job_state::scheduled: return "scheduled";
    case job_state::waiting: return "waiting";
    case job_state::ok: return "ok";
    case job_state::error: return "error";
    case job_state::deadline_exceeded: return "deadline_exceeded";
    case job_state::cancelled: return "cancelled";
    case job_state::rejected: return "rejected";
    case job_state::dead: return "dead";
  }
  return "queued";
}

// nullopt for a name that is not a state.
std::optional<job_state> parse_job_state(std::string_view name) noexcept;

// It has its outcome: nothing of it runs or waits any more.
constexpr bool is_final(job_state s) noexcept {
  return s != job_state::queued && s != job_state::running && s != job_state::scheduled && s != job_state::waiting;
}

// The final state of a job that ended with `o` (invalid: refused before it
// was a job; never held, so it never reaches here: rejected).
constexpr job_state final_state(outcome o) noexcept {
  switch (o) {
    case outcome::ok: return job_state::ok;
    case outcome::error: return job_state::error;
    case outcome::deadline_exceeded: return job_state::deadline_exceeded;
    case outcome::cancelled: return job_state::cancelled;
    case outcome::rejected:
    case outcome::invalid: return job_state::rejected;
  }
  return job_state::rejected;
}

// A listing's `state` filter: any state, one state, any final one
// ("finished"), or a job scheduled for an attempt after its first
// ("retrying", a subset of scheduled).
struct job_filter {
  enum class kind : std::uint8_t { any, one, finished, retrying };
  kind k = kind::any;
  job_state state = job_state::queued;  // kind one

  // Whether a job in `s` matches; `retry_wait`: scheduled for an attempt
  // after its first (not its first's delay).
  constexpr bool matches(job_state s, bool retry_wait) const noexcept {
    switch (k) {
      case kind::any: return true;
      case kind::one: return s == state;
      case kind::finished: return is_final(s);
      case kind::retrying: return s == job_state::scheduled && retry_wait;
    }
    return false;
  }
};

// "" any, "finished", "retrying" or a state's name; nullopt otherwise.
std::optional<job_filter> parse_job_filter(std::string_view text) noexcept;

}  // namespace hourglass::jobs
