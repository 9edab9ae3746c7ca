// The consumer's reader thread: this name's own pending entries first, then
// new ones (taken: read and started in one script call while a backlog
// waits for free workers, the reply delivered on the connection's thread;
// else a blocking XREADGROUP), and reclaims
// (XAUTOCLAIM) of entries idle past the lease; each delivery judged on the
// broker's TIME before it is queued.
#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <mutex>
#include <utility>

#include "consumer_impl.hpp"
#include "hourglass/job_bounds.hpp"
#include "read_backoff.hpp"

namespace hourglass::fleet {

namespace {

using namespace std::chrono_literals;

duration ms_field(std::string_view text, duration if_missing) {
  long long v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) return if_missing;
  return std::chrono::milliseconds(v);
}

std::optional<std::int64_t> number_field(std::string_view text) {
  std::int64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

}  // namespace

void consumer::impl::deliver(const std::vector<stream_entry>& entries, bool reclaimed, std::optional<timed_now> now,
                             const std::map<std::string, prestart_ptr>& started) {
  if (entries.empty()) return;
  if (!now) {
    const time_point sent = clk.now();
    now = timed_now{sent, broker_time()};
  }
  const time_point sent = now->sent;
  const std::int64_t broker_now = now->broker_us;
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
    entry_terms t;
    t.freshness = ms_field(e.field("freshness_ms"), duration::max());
    t.min_budget = ms_field(e.field("min_budget_ms"), duration::zero());
    // A delayed job or a retry: its freshness counts from its due time.
    t.counted_from = *sid;
    if (const auto due = number_field(e.field("due_ms")))
      t.counted_from = stream_id{static_cast<std::uint64_t>(*due), 0};
    const job_age age = age_on_broker(t.counted_from, broker_now);
    if (const auto deadline_us = number_field(e.field("deadline_us")); deadline_us && opts.judge_freshness) {
      t.deadline = *deadline_us <= broker_now
                       ? sent
                       : saturating_add(sent, std::chrono::microseconds(*deadline_us - broker_now));
    }
    t.start_by = opts.judge_freshness ? std::min(start_by_on_our_clock(age, t.freshness, sent), t.deadline) : never;
    // A take's answer decided already (run, or dead, cancelled, ...): the
    // worker acts on it as on its own start's, the final freshness check
    // included, so the broker's record and ours never tell two stories.
    const auto s = started.find(e.id);
    const prestart_ptr pre = s == started.end() ? nullptr : s->second;
    {
      std::lock_guard lock(mu);
      const auto [it, added] = held_entries.try_emplace(e.id);
      if (!added) continue;  // ours already (reclaimed while we renewed late)
      held& h = it->second;
      h.job_id = job_id;
      h.handler = e.field("handler");
      h.reclaimed = reclaimed;
      h.queued = age.waited;
      ++(reclaimed ? st.reclaimed : st.delivered);
      if (age.negative) ++st.negative_ages;  // the broker's clock stepped back: judged as waited zero
      if (pre && pre->answer.v == job_queue::start_answer::verdict::run) {
        if (stop_reading.get().done()) {
          // Taken as a drain or a fence stopped reading: no worker begins it
          // now; it goes back with its delivery uncounted (hand_back.lua).
          feed_locked(it, detail::held_event::refused);
          continue;
        }
        h.started_by_take = true;
      }
      if (!pre && opts.judge_freshness &&
          !starts_in_time({.start_by = t.start_by, .min_budget = t.min_budget}, clk.now())) {
        ++(reclaimed ? st.expired_reclaim : st.expired_queue);
        const status late = status::expired(reclaimed ? expiry_stage::reclaim : expiry_stage::queue);
        outcome_parts o{std::nullopt, detail::expired_fields(h.queued, late.stage), late};
        feed_locked(it, detail::held_event::outcome_ready, nullptr, &o);
        continue;
      }
    }
    submit(e.id, job_id, e.field("handler"), t, pre);
  }
}

// The broker's TIME; call it right after taking our own clock's reading.
// (On a cluster, the clock of the node holding the queue.)
std::int64_t consumer::impl::broker_time() {
  return time_of(queue.connection().call(stop_reading.get(), {"TIME"}, false, queue.key("stream")));
}

std::int64_t consumer::impl::time_of(const redis_reply& t) {
  if (!t.is_array() || t.elements.size() != 2) throw redis_unavailable("redis: TIME: unexpected reply");
  const auto now_us = parse_broker_time(t.elements[0].str, t.elements[1].str);
  if (!now_us) throw redis_unavailable("redis: TIME is not a time");
  note_offset(*now_us);
  return *now_us;
}

// The blocking read of new entries with the broker's TIME pipelined behind
// it on the same connection: Redis answers the TIME right after it serves
// the read, so the entries are judged on the broker's clock at their
// delivery without a round trip of their own. `sent` is taken when the
// answers are here (the TIME is at most a reply's transit old).
consumer::impl::timed_read consumer::impl::read_new(const context& ctx, std::vector<std::string> xreadgroup) {
  struct waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<redis_result> read, time;
  };
  auto w = std::make_shared<waiter>();
  const auto keep = [w](std::optional<redis_result> waiter::*slot) {
    return [w, slot](redis_result r) {
      std::lock_guard lock(w->mu);
      (*w).*slot = std::move(r);
      w->cv.notify_all();
    };
  };
  reader.async_call(ctx, std::move(xreadgroup), keep(&waiter::read), true);
  reader.async_call(ctx, {"TIME"}, keep(&waiter::time), true, queue.key("stream"));
  std::unique_lock lock(w->mu);
  w->cv.wait(lock, [&] { return w->read.has_value() && w->time.has_value(); });
  for (const redis_result* r : {&*w->read, &*w->time}) {
    if (r->result == redis_result::code::stopped) throw stopped_error(r->stop_status);
    if (r->result == redis_result::code::unavailable) throw redis_unavailable(r->message);
  }
  timed_read out;
  out.entries = read_entries(w->read->reply);
  out.now = timed_now{clk.now(), out.entries.empty() ? 0 : time_of(w->time->reply)};
  return out;
}

void consumer::impl::start_take(std::size_t count) {
  {
    std::lock_guard lock(mu);
    taking += count;
    ++takes_in_flight;
  }
  // Not cut off by a drain's stop: entries it started, unheard of, would wait
  // for the lease to end before anyone reclaimed them, a delivery counted;
  // answered, deliver() hands them back uncounted. (Bounded by the
  // connection's io_timeout; drain waits for it.)
  const time_point sent = clk.now();
  queue.async_take(context(), opts.name, count, opts.max_deliveries, lease_v.token, opts.judge_freshness,
                   [self = shared_from_this(), count, sent](async_answer<job_queue::taken> a) {
                     self->on_taken(count, sent, std::move(a));
                   });
}

// On the connection's thread: the take's entries to the executor, then its
// reservation released (after: busy never reads low while they arrive).
void consumer::impl::on_taken(std::size_t count, time_point sent, async_answer<job_queue::taken> a) noexcept {
  std::string failure;
  std::size_t got = 0;
  try {
    if (a.error) std::rethrow_exception(a.error);
    note_offset(a.value.broker_now_us);
    std::map<std::string, prestart_ptr> started;
    std::vector<stream_entry> entries;
    entries.reserve(a.value.entries.size());
    for (job_queue::taken_entry& e : a.value.entries) {
      if (e.started) started.emplace(e.id, std::make_shared<prestart>(prestart{std::move(*e.started), sent}));
      entries.push_back(stream_entry{std::move(e.id), false, std::move(e.fields)});
    }
    got = entries.size();
    deliver(entries, false, timed_now{clk.now(), a.value.broker_now_us}, started);
  } catch (const std::exception& e) {  // redis_unavailable, or a reply we cannot read
    failure = e.what();
  } catch (...) {
    failure = "unknown error";
  }
  {
    std::lock_guard lock(mu);
    taking -= count;
    --takes_in_flight;
    backlog_likely = failure.empty() && got == count;  // as many as it asked: more may wait
    if (failure.empty()) {
      takes_failed_in_row = 0;
    } else {
      ++st.broker_errors;
      take_failed = true;
      ++takes_failed_in_row;
    }
    slot_freed.notify_all();
  }
  if (!failure.empty()) log("fleet: taking from queue " + queue.options().name + ": " + failure);
}

void consumer::impl::note_offset(std::int64_t broker_now_us) {
  const auto ours = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  std::lock_guard lock(mu);
  st.broker_clock_offset_us = broker_now_us - ours;
}

// The delayed set's due jobs to the stream (promote.lua), any daemon's
// reader doing it; when to look again: at the earliest due time left, and
// at least every promote_every (another daemon may schedule an earlier one).
time_point consumer::impl::promote_due(const context& ctx) {
  constexpr std::size_t batch = 100;
  const duration promote_every = std::min<duration>(opts.read_block, 200ms);
  const time_point now = clk.now();
  const std::vector<job_queue::delayed_job> first = queue.first_delayed(ctx, batch);
  if (first.empty()) return now + promote_every;
  // Which look due, by our estimate of the broker's clock (the script decides
  // on its own TIME; one a little early is left in the set).
  std::int64_t broker_now_us = 0;
  {
    std::lock_guard lock(mu);
    broker_now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count() +
                    st.broker_clock_offset_us;
  }
  std::vector<std::string> due;
  for (const job_queue::delayed_job& d : first) {
    if (d.due_ms * 1000 <= broker_now_us + 2000) due.push_back(d.job_id);
  }
  std::optional<std::int64_t> next_due_ms = first.front().due_ms;
  if (!due.empty()) {
    std::optional<duration> wait;
    if (opts.judge_freshness) {
      std::lock_guard lock(mu);
      wait = predicted_wait;
    }
    const job_queue::promoted p = queue.promote(ctx, due, wait);
    note_offset(p.broker_now_us);
    broker_now_us = p.broker_now_us;
    next_due_ms = p.next_due_ms;
    {
      std::lock_guard lock(mu);
      st.promoted += p.moved;
      st.expired_admission += p.expired_handlers.size();
    }
    for (const std::string& h : p.expired_handlers) count_recorded(h, status::expired(expiry_stage::admission));
    for (const std::string& h : p.human_wait_handlers) count_recorded(h, status::expired(expiry_stage::human_wait));
    for (const std::string& h : p.cancelled_handlers) count_recorded(h, status::cancelled(cancel_cause::parent));
    if (due.size() == batch) return now;  // more may be due
  }
  if (!next_due_ms) return now + promote_every;
  const auto until = std::chrono::microseconds(*next_due_ms * 1000 - broker_now_us);
  return now + std::clamp<duration>(until, duration::zero(), promote_every);
}

// Woken by a slot freed or a job a take started reaching a worker
// (feed_locked, while no take is in flight: with one, room() is 0 until its
// answer, which wakes it), a take's answer
// (on_taken), a renewal after a fence or a pause
// (renew) or the stop (stop_reading_locked); gives up at `until` (0: no
// room by then, or reading stopped). A paused queue has no room.
std::size_t consumer::impl::wait_for_room(time_point until) {
  std::unique_lock lock(mu);
  const auto room = [&] { return detail::room_to_read(holding_locked(), reading_limits()); };
  clk.wait_until(lock, slot_freed, until, [&] { return stop_reading.get().done() || room() > 0; });
  return stop_reading.get().done() ? 0 : room();
}

void consumer::impl::read_loop() {
  const context& ctx = stop_reading.get();
  std::string own_from = "0";  // our own pending entries (an earlier life's) come first
  bool own_done = false;
  std::string claim_cursor = "0-0";
  time_point next_reclaim = clk.now();
  time_point next_promote = clk.now();
  const std::string stream = queue.key("stream");
  const std::string group(job_queue::group);
  std::size_t failed_reads = 0;  // in a row, since a pass through the loop worked
  while (!ctx.done()) {
    // Full, due jobs still move on time: judged when due, and in the stream
    // ahead of work enqueued after them.
    const std::size_t room = wait_for_room(next_promote);
    if (ctx.done()) break;
    const std::string count = std::to_string(room);
    bool backlog = false;
    bool failed = false;
    std::size_t failed_takes = 0;
    std::size_t free = 0;
    {
      std::lock_guard lock(mu);
      failed = std::exchange(take_failed, false);
      failed_takes = takes_failed_in_row;
      backlog = backlog_likely;
      free = std::min(room, detail::room_to_start(holding_locked(), reading_limits()));
    }
    if (failed) {
      // A take's reply lost on its way may have held entries for us,
      // already started: our pending list is read again, so they run now,
      // under the same start token (counted once), not after a lease. A
      // take that fails again (a script's error, the broker up) waits
      // first, and the room is judged again after the wait.
      own_done = false;
      own_from = "0";
      if (const duration wait = detail::after_failed_takes(failed_takes); wait > duration::zero()) {
        if (!ctx.sleep_for(wait)) break;
        continue;
      }
    }
    try {
      if (room == 0) {
        next_promote = promote_due(ctx);
        continue;
      }
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
      if (clk.now() >= next_promote) next_promote = promote_due(ctx);
      // With more waiting than the last read took, free workers get their
      // entries read and started in one step; a blocking read waits for new
      // ones otherwise (and for entries held beyond the workers, prefetch).
      if (backlog && free > 0) {
        failed_reads = 0;  // a whole pass worked (the own-pending read alone is no sign: it works when promote fails)
        start_take(free);
        continue;
      }
      const auto block = std::clamp<duration>(std::min(next_reclaim, next_promote) - clk.now(), 1ms, opts.read_block);
      const timed_read r = read_new(
          ctx, {"XREADGROUP", "GROUP", group, opts.name, "COUNT", count, "BLOCK",
                std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(block).count()), "STREAMS", stream,
                ">"});
      deliver(r.entries, false, r.now);
      {
        std::lock_guard lock(mu);
        backlog_likely = r.entries.size() == room;  // as many as it asked: more may wait
      }
      failed_reads = 0;
    } catch (const stopped_error&) {
      break;
    } catch (const std::exception& e) {  // redis_unavailable, or a reply we cannot read
      {
        std::lock_guard lock(mu);
        ++st.broker_errors;
      }
      log(std::string("fleet: reading queue ") + queue.options().name + ": " + e.what());
      // A reply lost on its way may have held entries for us (a take's
      // already started): our pending list is read again, so they run now,
      // under the same start token (counted once), not after a lease.
      own_done = false;
      own_from = "0";
      ctx.sleep_for(detail::after_failed_reads(++failed_reads));
    }
  }
}

}  // namespace hourglass::fleet
