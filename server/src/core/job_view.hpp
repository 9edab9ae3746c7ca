// The job object of the HTTP API (docs/reference/http-api.md, "The job
// object"), whatever store holds the job, and the one renderer of it and of
// the answers that carry it: GET and DELETE of /v1/jobs/{id}, and the 202 of
// an accepted async job. Pure: no store, no clock. Internal to the server.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hourglass/job.hpp"
#include "hourglass/jobs/job_state.hpp"

namespace hourglass::server::detail {

// What a job was sent, as the job object shows it: its size and content
// type, and at most payload_shown_bytes of it (for display: an operator
// looking at a dead job, not a way to fetch megabytes through a listing).
inline constexpr std::size_t payload_shown_bytes = 4096;
struct payload_view {
  std::size_t bytes = 0;  // the whole payload's size
  std::string content_type;
  std::string shown;  // its first bytes, cut at a UTF-8 boundary when the payload is text
};
// The payload as shown: the first payload_shown_bytes, a UTF-8 sequence cut
// by that bound left out whole (so valid text stays valid text).
payload_view shown_payload(std::string_view payload, std::string_view content_type);

// An earlier attempt of a retried job.
struct attempt_view {
  std::string outcome, stage;  // the attempt's outcome; stage for deadline_exceeded
  std::string error, message;  // error: the handler's
  double run_ms = 0;
};

struct job_view {
  std::string id;
  std::string handler;
  // "queued", "running", "scheduled" (a retry waits for its due time),
  // "waiting" (a parent for its children), an
  // outcome's name (ok, error, ...), or "dead" (fleet: dead-lettered after
  // its workers kept dying).
  std::string state;
  bool cancel_requested = false;            // until it finishes
  std::optional<unsigned> deliveries;       // fleet: starts so far
  std::string consumer;                     // fleet: the daemon that started it last
  std::string parent;                       // a child job's parent ("" none)
  std::vector<std::string> children;        // the child jobs it enqueued
  std::string stage, cause, reason;         // deadline_exceeded / cancelled, dead / rejected
  std::string error, message;               // error: the handler's
  std::optional<unsigned> http_status;      // error
  std::optional<double> queued_ms, run_ms;  // once finished, as recorded
  std::optional<double> age_ms;             // since it was accepted (memory store: its clock)
  bool committed = false;
  std::string content_type, result;  // ok
  // What it was sent, while its store holds it: an unfinished job's, and a
  // dead job's (kept for replay). Dropped with any other outcome.
  std::optional<payload_view> payload;
  // With a retry policy of more than one attempt:
  std::optional<int> attempt, attempts_left;  // attempts started so far; attempts it may still make
  std::vector<attempt_view> attempts;         // earlier attempts (the most recent ones), oldest first
  std::optional<double> due_in_ms;            // scheduled: time until the next attempt may start
  // A parent waiting for its children (handler_result::wait_for): what for
  // ("all", "first:<n>", "first_success") and the time left until its wait
  // ends whatever has finished (absent: no deadline). Once woken: how often,
  // and what woke it last ("children" or "deadline").
  std::string waiting_for;
  std::optional<double> wake_in_ms;
  int wakes = 0;
  std::string woke_by;
  // A job that waited for a person (waiting_for "signal:<name>"): both
  // clocks. The machine's budget (its run and queue time; left: until its
  // deadline, standing still while it waits) and the person's wait (used
  // across its waits; left: until the current wait's limit).
  std::optional<double> machine_used_ms, machine_left_ms;
  std::optional<double> human_wait_used_ms, human_wait_left_ms;
  // Its timeline, in ms from its acceptance (fleet: the broker's clock);
  // without accepted, no timeline (a fleet job enqueued before it was kept).
  bool accepted = false;
  std::optional<double> freshness_ms;    // how long an attempt may wait from its due time; absent: no bound
  std::optional<double> deadline_at_ms;  // the whole job's deadline (Job-Deadline)
  std::optional<double> due_at_ms;       // the current attempt's due time (delayed or retried)
  std::optional<double> started_at_ms;   // its latest start
  std::optional<double> finished_at_ms;  // its outcome (memory; the fleet records no finish time)
  struct start_view {
    double at_ms = 0;
    std::string consumer;
  };
  std::vector<start_view> starts;  // fleet: its deliveries (the last 10), oldest first, the latest included

  // Its outcome is in (a state this daemon does not know counts as one: it
  // will not run here).
  bool finished() const noexcept {
    const auto s = jobs::parse_job_state(state);
    return !state.empty() && (!s || jobs::is_final(*s));
  }
  // Whether it is in `s` (a state this daemon does not know is none of them).
  bool in(jobs::job_state s) const noexcept { return state == jobs::to_string(s); }
  // What the outcome recorded of its time, for Server-Timing.
  job_timings timings() const;
};

// The JSON body: fields that do not apply to the job's state are left out.
// `whole`: with its result and its payload as shown (GET of the job);
// `listed`: the sizes only, as `result_bytes` and `payload_bytes` (a page of
// jobs, where results would be as large as all of them together: GET the
// job for its result). A payload shown is `text` when it is UTF-8, else
// `base64`, with `truncated` when it was longer than shown.
enum class job_detail { whole, listed };
std::string job_json(const job_view& j, job_detail detail = job_detail::whole);

// "timeline": where the job's time went, as events from its acceptance:
// accepted (its freshness, its deadline), each earlier attempt's end, the
// current attempt's due time, its start (the delivery, how long it waited,
// how much of its freshness was left), its end (state, stage, run time).
// Times it cannot know are left out, never guessed.
std::string timeline_json(const job_view& j);

}  // namespace hourglass::server::detail
