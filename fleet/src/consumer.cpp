#include "hourglass/fleet/consumer.hpp"

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "hourglass/fleet/freshness.hpp"
#include "hourglass/fleet/lease.hpp"
#include "stream_reply.hpp"

namespace hourglass::fleet {

namespace {

using namespace std::chrono_literals;
using field_list = std::vector<std::pair<std::string, std::string>>;

std::string ms_text(duration d) {
  const double ms = std::chrono::duration<double, std::milli>(d).count();
  char buf[32];
  const auto [p, ec] = std::to_chars(buf, buf + sizeof buf, ms, std::chars_format::fixed, 3);
  return ec == std::errc() ? std::string(buf, p) : "0";
}

duration ms_field(std::string_view text, duration if_missing) {
  long long v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) return if_missing;
  return std::chrono::milliseconds(v);
}

// What the job's function returns to its completion.
struct run_value {
  enum class kind { ran, expired, skipped, dead };
  kind k = kind::skipped;
  job_output out;
};

}  // namespace

struct consumer::impl : std::enable_shared_from_this<impl> {
  // One entry this daemon holds (delivered to it, outcome not yet written).
  struct held {
    std::string job_id;
    bool reclaimed = false;  // taken over from a dead holder: expiry is stage reclaim
    job_ref ref;             // while in the executor
    bool abandoned = false;  // no outcome from us: handed back, fenced or lost
    bool hand_back = false;  // abandoned, and to be handed back at once
    bool started = false;    // the start script said run
    bool writing = false;    // its outcome waits in the outbox
    duration queued{};       // the broker's age of the job when it started (or expired)
    time_point run_start{};
  };
  struct outcome_to_write {
    std::string entry;
    std::string job_id;
    std::optional<duration> run_time;
    field_list fields;
  };

  impl(job_queue& q, redis_connection& r, executor& ex, job_runner run, consumer_options o)
      : queue(q),
        reader(r),
        jobs(ex),
        clk(ex.get_clock()),
        runner(std::move(run)),
        opts(std::move(o)),
        timing(lease_timing_for(opts.lease)),
        stop_reading(clk),
        stop_keeping(clk) {}

  job_queue& queue;
  redis_connection& reader;
  executor& jobs;
  hourglass::clock& clk;
  job_runner runner;
  consumer_options opts;
  lease_timing timing;
  context_source stop_reading;
  context_source stop_keeping;

  mutable std::mutex mu;
  std::condition_variable slot_freed;        // the reader waits for room
  std::condition_variable work_ready;        // the writer waits for outcomes to write
  std::map<std::string, held> held_entries;  // by entry id
  std::deque<outcome_to_write> outbox;
  std::vector<job_queue::held_entry> to_hand_back;  // started: this daemon's start script ran for it
  lease_value lease_v;
  time_point last_renewed{};
  bool self_fenced = false;
  consumer_stats st;
  std::thread reader_thread;
  std::thread renewer_thread;
  std::thread writer_thread;
  bool running = false;

  void log(const std::string& line) const {
    if (opts.log) opts.log(line);
  }

  // ---- bookkeeping (under mu) ----

  std::size_t busy_locked() const {
    std::size_t n = 0;
    for (const auto& [entry, h] : held_entries) n += h.writing ? 0 : 1;
    return n;
  }

  std::vector<job_queue::held_entry> renewable_locked() const {
    std::vector<job_queue::held_entry> out;
    for (const auto& [entry, h] : held_entries) {
      if (!h.abandoned) out.push_back({entry, h.job_id});
    }
    return out;
  }

  // Gives up jobs without an outcome from us; their refs to cancel, outside the lock.
  std::vector<job_ref> abandon_locked(bool hand_back, bool include_started) {
    std::vector<job_ref> refs;
    for (auto& [entry, h] : held_entries) {
      if (h.abandoned || h.writing || (h.started && !include_started)) continue;
      h.abandoned = true;
      h.hand_back = hand_back;
      refs.push_back(h.ref);
    }
    return refs;
  }

  void push_outcome_locked(const std::string& entry, held& h, std::optional<duration> run, field_list fields) {
    h.writing = true;
    h.ref = job_ref();
    if (outbox.size() >= opts.max_unwritten_outcomes) {
      // The broker has been gone for long: drop the oldest; its entry is
      // reclaimed and run again once the broker is back (at least once).
      held_entries.erase(outbox.front().entry);
      outbox.pop_front();
      ++st.outcomes_dropped;
    }
    outbox.push_back({entry, h.job_id, run, std::move(fields)});
    work_ready.notify_one();
    slot_freed.notify_one();
  }

  void forget_locked(const std::string& entry) {
    held_entries.erase(entry);
    slot_freed.notify_one();
  }

  field_list expired_fields(const held& h, std::string_view stage) const {
    return {{"state", "deadline_exceeded"}, {"stage", std::string(stage)}, {"queued_ms", ms_text(h.queued)}};
  }

  // ---- delivery (reader thread) ----

  void deliver(const std::vector<stream_entry>& entries, bool reclaimed) {
    if (entries.empty()) return;
    const time_point sent = clk.now();
    const std::int64_t broker_now = broker_time();
    for (const stream_entry& e : entries) {
      const std::string job_id = e.field("id");
      const std::optional<stream_id> sid = parse_stream_id(e.id);
      if (e.deleted || job_id.empty() || !sid) {
        // In our pending list with its data gone: something trimmed the
        // stream (our finish acknowledges and deletes together). Loss alarm.
        {
          std::lock_guard lock(mu);
          ++st.lost_entries;
        }
        log("fleet: loss alarm: pending entry " + e.id + " of queue " + queue.options().name +
            " has no job (deleted from the stream)");
        continue;
      }
      const duration freshness = ms_field(e.field("freshness_ms"), duration::max());
      const duration min_budget = ms_field(e.field("min_budget_ms"), duration::zero());
      const job_age age = age_on_broker(*sid, broker_now);
      const time_point start_by = start_by_on_our_clock(age, freshness, sent);
      {
        std::lock_guard lock(mu);
        if (held_entries.count(e.id) != 0) continue;  // ours already (reclaimed while we renewed late)
        held& h = held_entries[e.id];
        h.job_id = job_id;
        h.reclaimed = reclaimed;
        h.queued = age.waited;
        ++(reclaimed ? st.reclaimed : st.delivered);
        if (!worth_starting(start_by, min_budget, clk.now())) {
          ++(reclaimed ? st.expired_reclaim : st.expired_queue);
          push_outcome_locked(e.id, h, std::nullopt, expired_fields(h, reclaimed ? "reclaim" : "queue"));
          continue;
        }
      }
      submit(e.id, job_id, e.field("handler"), start_by, freshness, min_budget, *sid);
    }
  }

  // The broker's TIME; call it right after taking our own clock's reading.
  std::int64_t broker_time() {
    const redis_reply t = queue.connection().call(stop_reading.get(), {"TIME"});
    if (!t.is_array() || t.elements.size() != 2) throw redis_unavailable("redis: TIME: unexpected reply");
    const auto now_us = parse_broker_time(t.elements[0].str, t.elements[1].str);
    if (!now_us) throw redis_unavailable("redis: TIME is not a time");
    note_offset(*now_us);
    return *now_us;
  }

  void note_offset(std::int64_t broker_now_us) {
    const auto ours = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    std::lock_guard lock(mu);
    st.broker_clock_offset_us = broker_now_us - ours;
  }

  void submit(const std::string& entry, const std::string& job_id, const std::string& handler, time_point start_by,
              duration freshness, duration min_budget, stream_id sid) {
    job_options o;
    o.handler = handler.empty() ? std::string_view("default") : std::string_view(handler);
    o.start_by = start_by;
    o.min_budget = min_budget;
    if (runner.run_limit) o.run_limit = runner.run_limit(handler);
    auto self = shared_from_this();
    job_ref ref = jobs.submit(
        o,
        [self, entry, job_id, freshness, min_budget, sid](const context& ctx) {
          return self->start_and_run(ctx, entry, job_id, freshness, min_budget, sid);
        },
        [self, entry](job_result<run_value>&& r) noexcept { self->on_done(entry, std::move(r)); });
    bool abandoned_meanwhile = false;
    {
      std::lock_guard lock(mu);
      const auto it = held_entries.find(entry);
      if (it != held_entries.end() && !it->second.writing) {
        it->second.ref = ref;
        abandoned_meanwhile = it->second.abandoned;  // fenced or drained before the ref was here
      }
    }
    if (abandoned_meanwhile) ref.cancel(cancel_cause::shutdown);
  }

  // ---- a job's life (worker thread) ----

  run_value start_and_run(const context& ctx, const std::string& entry, const std::string& job_id, duration freshness,
                          duration min_budget, stream_id sid) {
    const time_point sent = clk.now();
    job_queue::start_answer a = queue.start(ctx, {entry, job_id}, opts.name, opts.max_deliveries);
    run_value v;
    const job_age age = age_on_broker(sid, a.broker_now_us);
    {
      std::lock_guard lock(mu);
      if (auto it = held_entries.find(entry); it != held_entries.end()) it->second.queued = age.waited;
    }
    using verdict = job_queue::start_answer::verdict;
    if (a.v == verdict::dead) {
      v.k = run_value::kind::dead;
      return v;
    }
    if (a.v != verdict::run) return v;  // skipped: not ours any more, or an outcome is recorded
    if (!worth_starting(start_by_on_our_clock(age, freshness, sent), min_budget, clk.now())) {
      v.k = run_value::kind::expired;
      return v;
    }
    delivered_job job;
    job.id = job_id;
    job.handler = std::move(a.handler);
    job.payload = std::move(a.payload);
    job.content_type = std::move(a.content_type);
    job.idempotency_key = a.idempotency_key.empty() ? job_id : std::move(a.idempotency_key);
    job.delivery = a.deliveries;
    {
      std::lock_guard lock(mu);
      const auto it = held_entries.find(entry);
      if (it == held_entries.end()) return v;
      it->second.started = true;  // the start script counted it: a hand-back must undo that
      // Handed back, fenced or lost while the start script ran: the handler
      // must not run (a handler that ignores its context would run it twice).
      if (it->second.abandoned || ctx.done()) return v;
      it->second.run_start = clk.now();
      ++st.started;
    }
    v.out = runner.run(ctx, job);
    v.k = run_value::kind::ran;
    return v;
  }

  error_record describe(std::exception_ptr e) const {
    if (runner.describe_error) return runner.describe_error(e);
    error_record r;
    try {
      if (e) std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      r.message = ex.what();
    } catch (...) {
      r.message = "unknown exception";
    }
    return r;
  }

  void on_done(const std::string& entry, job_result<run_value>&& r) noexcept {
    job_ref drop;  // released outside the lock
    std::lock_guard lock(mu);
    const auto it = held_entries.find(entry);
    if (it == held_entries.end()) return;
    held& h = it->second;
    drop = std::move(h.ref);
    if (h.abandoned) {
      if (h.hand_back && !h.writing) {
        to_hand_back.push_back({entry, h.job_id, h.started});
        h.writing = true;  // held until handed back
        work_ready.notify_one();
        slot_freed.notify_one();
      } else if (!h.hand_back) {
        forget_locked(entry);
      }
      return;
    }
    const std::string_view late_stage = h.reclaimed ? "reclaim" : "queue";
    const std::optional<duration> run = h.started ? std::optional<duration>(elapsed(h.run_start, clk.now()))
                                                  : std::nullopt;
    field_list f;
    switch (r.st.code) {
      case outcome::ok: {
        run_value& v = *r.result;
        if (v.k == run_value::kind::dead) ++st.dead_lettered;
        if (v.k == run_value::kind::dead || v.k == run_value::kind::skipped) {
          forget_locked(entry);  // recorded by the start script, or not ours
          return;
        }
        if (v.k == run_value::kind::expired) {
          ++(h.reclaimed ? st.expired_reclaim : st.expired_queue);
          f = expired_fields(h, late_stage);
          break;
        }
        f = {{"state", "ok"}, {"content_type", std::move(v.out.content_type)}, {"result", std::move(v.out.body)}};
        break;
      }
      case outcome::error: {
        if (!h.started) {
          // The start script failed (the broker went away): no outcome from
          // us; the entry is reclaimed after a lease, by us or another.
          ++st.broker_errors;
          forget_locked(entry);
          return;
        }
        const error_record e = describe(r.error);
        f = {{"state", "error"},
             {"error", e.code},
             {"message", e.message},
             {"http_status", std::to_string(e.http_status)}};
        break;
      }
      case outcome::deadline_exceeded:
        if (r.st.stage == expiry_stage::admission) {
          // This daemon's executor refused it (its own backlog): another
          // daemon may start it in time. Not the job's outcome.
          to_hand_back.push_back({entry, h.job_id, false});
          h.writing = true;
          work_ready.notify_one();
          slot_freed.notify_one();
          return;
        }
        if (r.st.stage == expiry_stage::queue) ++(h.reclaimed ? st.expired_reclaim : st.expired_queue);
        f = expired_fields(h, r.st.stage == expiry_stage::queue ? late_stage : to_string(r.st.stage));
        break;
      case outcome::cancelled:
        if (!h.started && r.st.cause != cancel_cause::requested) {
          to_hand_back.push_back({entry, h.job_id, false});
          h.writing = true;
          work_ready.notify_one();
          slot_freed.notify_one();
          return;
        }
        f = {{"state", "cancelled"}, {"cause", std::string(to_string(r.st.cause))}};
        break;
      default:  // refused by the executor (full, shutting down): back to the fleet at once
        to_hand_back.push_back({entry, h.job_id, false});
        h.writing = true;
        work_ready.notify_one();
        slot_freed.notify_one();
        return;
    }
    if (f.front().second != "deadline_exceeded") f.emplace_back("queued_ms", ms_text(h.queued));
    if (run) f.emplace_back("run_ms", ms_text(*run));
    push_outcome_locked(entry, h, run, std::move(f));
  }

  // ---- the reader thread ----

  std::size_t wait_for_room() {
    std::unique_lock lock(mu);
    while (!stop_reading.get().done()) {
      const std::size_t busy = busy_locked();
      if (!self_fenced && busy < opts.slots) return opts.slots - busy;
      slot_freed.wait_for(lock, 50ms);
    }
    return 0;
  }

  void read_loop() {
    const context& ctx = stop_reading.get();
    std::string own_from = "0";  // our own pending entries (an earlier life's) come first
    bool own_done = false;
    std::string claim_cursor = "0-0";
    time_point next_reclaim = clk.now();
    const std::string stream = queue.key("stream");
    const std::string group(job_queue::group);
    duration backoff = 50ms;
    while (!ctx.done()) {
      const std::size_t room = wait_for_room();
      if (room == 0) break;
      const std::string count = std::to_string(room);
      try {
        if (!own_done) {
          const redis_reply r = reader.call(
              ctx, {"XREADGROUP", "GROUP", group, opts.name, "COUNT", count, "STREAMS", stream, own_from});
          std::vector<stream_entry> entries = read_entries(r);
          if (entries.empty()) {
            own_done = true;
            continue;
          }
          own_from = entries.back().id;
          deliver(entries, true);
          continue;
        }
        if (clk.now() >= next_reclaim) {
          next_reclaim = clk.now() + timing.reclaim_every;
          const redis_reply r = queue.connection().call(
              ctx, {"XAUTOCLAIM", stream, group, opts.name,
                    std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(timing.lease).count()),
                    claim_cursor, "COUNT", count});
          const auto_claimed c = read_auto_claim(r);
          claim_cursor = c.cursor;
          if (!c.deleted.empty()) {
            {
              std::lock_guard lock(mu);
              st.lost_entries += c.deleted.size();
            }
            log("fleet: loss alarm: " + std::to_string(c.deleted.size()) + " pending entries of queue " +
                queue.options().name + " were deleted before they finished");
          }
          deliver(c.entries, true);
          if (!c.entries.empty()) continue;
        }
        const auto block = std::clamp<duration>(next_reclaim - clk.now(), 1ms, opts.read_block);
        const redis_reply r = reader.call(
            ctx,
            {"XREADGROUP", "GROUP", group, opts.name, "COUNT", count, "BLOCK",
             std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(block).count()), "STREAMS", stream,
             ">"},
            true);
        deliver(read_entries(r), false);
        backoff = 50ms;
      } catch (const stopped_error&) {
        break;
      } catch (const std::exception& e) {  // redis_unavailable, or a reply we cannot read
        {
          std::lock_guard lock(mu);
          ++st.broker_errors;
        }
        log(std::string("fleet: reading queue ") + queue.options().name + ": " + e.what());
        ctx.sleep_for(backoff);
        backoff = std::min<duration>(backoff * 2, 2s);
      }
    }
  }

  // ---- the renewer and the writer ----

  // One renewal; false when the broker could not be used.
  bool renew() {
    std::vector<job_queue::held_entry> entries;
    lease_value v;
    {
      std::lock_guard lock(mu);
      entries = renewable_locked();
      ++lease_v.renewals;
      v = lease_v;
    }
    const time_point sent = clk.now();
    // A renewal that answers after the fencing point is of no use: bound it there.
    time_point limit = saturating_add(last_renewed, timing.fence_after);
    if (limit <= sent) limit = saturating_add(sent, timing.renew_every);
    const context_source bounded = stop_keeping.get().child_until(limit);
    job_queue::renew_answer a;
    try {
      a = queue.renew(bounded.get(), opts.name, v, timing.lease, opts.slots, entries);
    } catch (const std::exception& e) {
      if (stop_keeping.get().done()) return false;
      std::vector<job_ref> refs;
      std::string fenced_line;
      {
        std::lock_guard lock(mu);
        ++st.broker_errors;
        if (!self_fenced && must_fence(last_renewed, clk.now(), timing)) {
          self_fenced = true;
          refs = abandon_locked(false, true);
          st.fenced_jobs += refs.size();
          fenced_line = "fleet: lease of " + opts.name + " not renewed for " +
                        ms_text(elapsed(last_renewed, clk.now())) + " ms: stopping its " + std::to_string(refs.size()) +
                        " jobs (the fleet may reclaim them)";
        }
      }
      for (job_ref& r : refs) r.cancel(cancel_cause::shutdown);
      log(std::string("fleet: renewing the lease of ") + opts.name + ": " + e.what());
      if (!fenced_line.empty()) log(fenced_line);
      return false;
    }
    note_offset(a.broker_now_us);
    std::vector<job_ref> cancel_requested, stop_lost;
    std::string line;
    {
      std::lock_guard lock(mu);
      if (a.fenced) {
        st.fenced = true;
        self_fenced = true;
        stop_lost = abandon_locked(false, true);
        st.fenced_jobs += stop_lost.size();
        line = "fleet: another process renews the lease of consumer " + opts.name + ": this one stops";
        stop_reading.cancel(cancel_cause::shutdown);
      } else {
        if (self_fenced) line = "fleet: lease of " + opts.name + " renewed again";
        self_fenced = false;
        last_renewed = sent;
        st.backlog = a.backlog;
        st.pending = a.pending;
        for (const std::string& e : a.marked) {
          if (auto it = held_entries.find(e); it != held_entries.end() && !it->second.abandoned) {
            cancel_requested.push_back(it->second.ref);
          }
        }
        for (const std::string& e : a.lost) {
          auto it = held_entries.find(e);
          if (it == held_entries.end() || it->second.abandoned || it->second.writing) continue;
          it->second.abandoned = true;  // another daemon holds it now
          stop_lost.push_back(it->second.ref);
        }
      }
    }
    for (job_ref& r : cancel_requested) r.cancel(cancel_cause::requested);
    for (job_ref& r : stop_lost) r.cancel(cancel_cause::shutdown);
    if (!line.empty()) log(line);
    return true;
  }

  // Writes what waits; false when the broker could not be used.
  bool flush(const context& ctx) {
    for (;;) {
      outcome_to_write o;
      {
        std::lock_guard lock(mu);
        if (outbox.empty()) break;
        o = outbox.front();
      }
      finish_result fr;
      try {
        fr = queue.finish(ctx, o.job_id, o.run_time, o.fields);
      } catch (const std::exception&) {
        std::lock_guard lock(mu);
        ++st.broker_errors;
        return false;
      }
      std::lock_guard lock(mu);
      if (fr == finish_result::first) ++st.outcomes_written;
      if (fr == finish_result::duplicate) ++st.duplicate_outcomes;
      if (!outbox.empty() && outbox.front().entry == o.entry) outbox.pop_front();
      forget_locked(o.entry);
    }
    std::vector<job_queue::held_entry> back;
    {
      std::lock_guard lock(mu);
      back.swap(to_hand_back);
    }
    if (back.empty()) return true;
    try {
      queue.hand_back(ctx, opts.name, back);
    } catch (const std::exception&) {
      std::lock_guard lock(mu);
      ++st.broker_errors;
      to_hand_back.insert(to_hand_back.end(), back.begin(), back.end());
      return false;
    }
    std::lock_guard lock(mu);
    st.handed_back += back.size();
    for (const auto& b : back) forget_locked(b.entry);
    return true;
  }

  // The renewer: nothing else on its thread, so outcomes waiting for a slow
  // broker never delay a renewal; each attempt is bounded by the fencing
  // point, so a hung broker fences on time.
  void renew_loop() {
    const context& ctx = stop_keeping.get();
    time_point next_renewal = clk.now() + timing.renew_every;
    while (!ctx.done()) {
      if (!ctx.sleep_until(next_renewal)) break;
      const time_point sent = clk.now();
      // A failed renewal is tried again soon: fencing counts from the last success.
      next_renewal = renew() ? sent + timing.renew_every : clk.now() + std::min<duration>(timing.renew_every, 200ms);
    }
  }

  // The writer: outcomes and hand-backs, as soon as they wait, retried while
  // the broker is away.
  void write_loop() {
    const context& ctx = stop_keeping.get();
    bool broker_ok = true;
    while (!ctx.done()) {
      {
        std::unique_lock lock(mu);
        const bool work = !outbox.empty() || !to_hand_back.empty();
        if (!work || !broker_ok) work_ready.wait_for(lock, broker_ok ? 1s : 100ms);
      }
      if (ctx.done()) break;
      broker_ok = flush(ctx);
    }
  }

  // ---- start and drain ----

  void start(const context& ctx) {
    queue.ensure_group(ctx);
    const std::string before = queue.lease_of(ctx, opts.name);
    if (!before.empty()) {
      // Someone held this name: alive if it renews within one renewal period.
      ctx.sleep_for(timing.renew_every + timing.renew_every / 4);
      ctx.check();
      const std::string after = queue.lease_of(ctx, opts.name);
      if (judge_name(before, after) == name_claim::live_holder) {
        throw name_taken("consumer name '" + opts.name + "' is held by a live process (its lease is renewed)");
      }
      lease_value old;
      if (!after.empty() && parse_lease(after, old)) queue.release(ctx, opts.name, old.token);
    }
    lease_v.token = new_job_id();
    if (!renew()) throw redis_unavailable("redis: the first lease renewal failed");
    {
      std::lock_guard lock(mu);
      if (st.fenced) throw name_taken("consumer name '" + opts.name + "' was taken while starting");
    }
    running = true;
    renewer_thread = std::thread([self = shared_from_this()] { self->renew_loop(); });
    writer_thread = std::thread([self = shared_from_this()] { self->write_loop(); });
    reader_thread = std::thread([self = shared_from_this()] { self->read_loop(); });
  }

  void drain(time_point deadline) {
    if (!running) return;
    running = false;
    stop_reading.cancel(cancel_cause::shutdown);
    if (reader_thread.joinable()) reader_thread.join();
    // Jobs not started yet go back at once; running ones get until the deadline.
    std::vector<job_ref> not_started;
    {
      std::lock_guard lock(mu);
      not_started = abandon_locked(true, false);
    }
    for (job_ref& r : not_started) r.cancel(cancel_cause::shutdown);
    {
      std::unique_lock lock(mu);
      while (busy_locked() > 0 && clk.now() < deadline) slot_freed.wait_for(lock, 10ms);
    }
    std::vector<job_ref> running_late;
    {
      std::lock_guard lock(mu);
      running_late = abandon_locked(true, true);
      // Hand back now, whether or not their handlers stop: another daemon may run them.
      for (auto& [entry, h] : held_entries) {
        if (h.abandoned && h.hand_back && !h.writing) {
          to_hand_back.push_back({entry, h.job_id, h.started});
          h.writing = true;
        }
      }
    }
    for (job_ref& r : running_late) r.cancel(cancel_cause::shutdown);
    stop_keeping.cancel(cancel_cause::shutdown);
    work_ready.notify_all();
    if (renewer_thread.joinable()) renewer_thread.join();
    if (writer_thread.joinable()) writer_thread.join();
    // Last writes on a context of their own, each bounded by the connection's io_timeout.
    const context last;
    flush(last);
    try {
      queue.release(last, opts.name, lease_v.token);
    } catch (const std::exception& e) {
      log(std::string("fleet: releasing the lease of ") + opts.name + ": " + e.what());
    }
  }

  consumer_stats stats() const {
    std::lock_guard lock(mu);
    consumer_stats s = st;
    s.held = held_entries.size();
    s.unwritten = outbox.size();
    return s;
  }
};

consumer::consumer(job_queue& queue, redis_connection& reader, executor& jobs, job_runner runner,
                   consumer_options options)
    : impl_(std::make_shared<impl>(queue, reader, jobs, std::move(runner), std::move(options))) {
  if (impl_->opts.name.empty()) throw std::invalid_argument("fleet consumer: a name is needed");
  if (impl_->opts.slots == 0) throw std::invalid_argument("fleet consumer: at least one slot");
  if (!impl_->runner.run) throw std::invalid_argument("fleet consumer: a job runner is needed");
}

consumer::~consumer() { stop(); }

void consumer::start(const context& ctx) { impl_->start(ctx); }
void consumer::drain(time_point deadline) { impl_->drain(deadline); }
void consumer::stop() { impl_->drain(impl_->clk.now()); }
consumer_stats consumer::stats() const { return impl_->stats(); }

}  // namespace hourglass::fleet
