// hourglassd --broker: async jobs on the fleet's durable queue (docs/fleet.md;
// keys and scripts: docs/reference/fleet-layout.md). The producer's calls
// (enqueue, GET, DELETE, listing) are chains of asynchronous broker calls,
// pipelined on one connection: no thread waits on a round trip. The fleet
// consumer feeds this daemon's share of the queue into its executor and runs
// the handlers.
#include "stores/fleet_job_store.hpp"

#include <atomic>
#include <future>
#include <mutex>

#include <fmt/format.h>

#include "core/core.hpp"
#include "core/job_input.hpp"
#include "core/request_bucket.hpp"
#include "core/totals_rates.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/fleet/sharded_consumer.hpp"
#include "hourglass/fleet/sharded_queue.hpp"
#include "hourglass/jobs/job_state.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"
#include "schedules/schedules.hpp"
#include "stores/fleet_dead_letter.hpp"
#include "stores/fleet_views.hpp"
#include "stores/fleet_wiring.hpp"
#include "terms/terms.hpp"

namespace hourglass::server::detail {

namespace {

class fleet_job_store final : public job_store {
 public:
  fleet_job_store(core& c, std::uint16_t port)
      : c_(c),
        broker_(support::parse_broker_url(c.opts.broker, "--broker")),
        commands_(connect_fleet_broker(c, broker_, "commands")),
        queue_(*commands_, {.name = c.opts.queue,
                            .result_ttl = c.opts.result_ttl,
                            .idempotency_ttl = c.opts.idempotency_ttl,
                            .dead_ttl = c.opts.dead_ttl,
                            .dead_max = c.opts.dead_max,
                            .refuse_while_paused = c.opts.refuse_while_paused,
                            .replicas = static_cast<unsigned>(c.opts.broker_replicas),
                            .replica_timeout = c.opts.broker_replica_timeout,
                            .shards = static_cast<unsigned>(c.opts.queue_shards),
                            .parent_reserve = c.opts.call_reserve,
                            .max_job_depth = c.opts.max_job_depth,
                            .max_children = c.opts.max_children,
                            .clock = &c.clk}),
        consumer_name_(c.opts.consumer.empty() ? this_host_name() + ":" + std::to_string(port) : c.opts.consumer),
        consumers_(queue_, readers(c), *c.jobs, fleet_runner(c), consumer_settings(c)) {}

  // The producer's calls in flight end first: their callbacks use the queue.
  // Once the I/O threads have stopped none will run, and none is waited for.
  ~fleet_job_store() override {
    consumers_.stop();
    calls_.wait_none([this] { return c_.io.stopped(); });
  }

  // `fn`, counted as a call in flight until it has run.
  template <class Fn>
  auto tracked(Fn fn) {
    return calls_.tracked(std::move(fn));
  }

  void start() override {
    if (c_.opts.produce_only) {
      queue_.ensure_groups(context());
      c_.log->info("fleet: taking jobs for queue {} on {}; other daemons run them (--produce-only)", c_.opts.queue,
                   c_.opts.broker);
      return;
    }
    consumers_.start(context());
    c_.log->info("fleet: consuming queue {} on {} as {}", c_.opts.queue, c_.opts.broker, consumer_name_);
  }

  void create(new_job job, callback<created> done) override {
    fleet::job_spec spec;
    if (std::optional<created> bad = spec_of(job, spec)) return done(std::move(*bad));
    const handler_entry& e = *job.in->entry;
    const duration asked = job.freshness, left = spec.freshness;
    queue_.async_enqueue(
        context(), std::move(spec),
        tracked([this, &e, asked, left, done = std::move(done)](fleet::async_answer<fleet::enqueued> a) {
          on_enqueued(e, asked, left, std::move(a), done);
        }));
  }

  // One script call for all of them (job_queue::async_enqueue_bulk).
  void create_bulk(std::vector<new_job> jobs, callback<std::vector<created>> done) override {
    if (jobs.empty()) return done({});
    auto gather = std::make_shared<created_gather>(jobs.size(), std::move(done));
    struct sent {
      std::size_t index;
      const handler_entry* entry;
      duration asked, left;
    };
    std::vector<sent> sent_jobs;
    std::vector<fleet::job_spec> specs;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      fleet::job_spec spec;
      if (std::optional<created> bad = spec_of(jobs[i], spec)) {
        gather->put(i, std::move(*bad));
        continue;
      }
      sent_jobs.push_back({i, jobs[i].in->entry, jobs[i].freshness, spec.freshness});
      specs.push_back(std::move(spec));
    }
    if (specs.empty()) return;
    queue_.async_enqueue_bulk(
        context(), std::move(specs),
        tracked([this, gather, sent_jobs = std::move(sent_jobs)](std::vector<fleet::async_answer<fleet::enqueued>> as) {
          for (std::size_t k = 0; k < as.size(); ++k) {
            const sent& j = sent_jobs[k];
            on_enqueued(*j.entry, j.asked, j.left, std::move(as[k]),
                        [gather, i = j.index](created r) { gather->put(i, std::move(r)); });
          }
        }));
  }

  void find(std::string id, callback<found> done) override {
    queue_.async_find(
        context(), id,
        tracked([this, id, done = std::move(done)](fleet::async_answer<std::optional<fleet::fleet_job>> a) {
          done(found_of(a.error, a.value, "lookup", id));
        }));
  }

  void cancel(std::string id, cancel_cause cause, callback<found> done) override {
    queue_.async_cancel(
        context(), id, tracked([this, id, cause, done = std::move(done)](fleet::async_answer<fleet::cancelled_job> a) {
          if (!a.error && a.value.cancelled_here && a.value.job) {
            // This daemon recorded its outcome: counted here, as the consumers count theirs.
            c_.jobs->stats().on_recorded(c_.jobs->handler(a.value.job->handler), status::cancelled(cause));
          }
          if (!a.error) {  // and those of the family its cancel ended on the spot
            for (const std::string& h : a.value.family_cancelled_here) {
              c_.jobs->stats().on_recorded(c_.jobs->handler(h.empty() ? "default" : h),
                                           status::cancelled(cancel_cause::parent));
            }
          }
          done(found_of(a.error, a.value.job, "cancel", id));
        }),
        cause);
  }

  void signal(std::string id, std::string name, std::string payload, callback<signal_result> done) override {
    queue_.async_signal(context(), id, std::move(name), std::move(payload),
                        tracked([this, id, done = std::move(done)](fleet::async_answer<fleet::signal_answer> a) {
                          const found f = found_of(a.error, a.value.job, "signal", id);
                          signal_result r;
                          r.job = f.job;
                          if (f.verdict == found::kind::unavailable) {
                            r.verdict = signal_result::kind::unavailable;
                          } else if (a.value.verdict == fleet::signal_answer::kind::delivered) {
                            r.verdict = signal_result::kind::delivered;
                          } else if (a.value.verdict == fleet::signal_answer::kind::not_waiting) {
                            r.verdict = signal_result::kind::not_waiting;
                            if (a.value.expired_here) {  // this daemon recorded its end: counted here
                              c_.jobs->stats().on_recorded(c_.jobs->handler(f.job.handler),
                                                           status::expired(expiry_stage::human_wait));
                            }
                          }
                          done(std::move(r));
                        }));
  }

  void queue_state(queue_action a, callback<queue_answer> done) override {
    const fleet::queue_op op = a == queue_action::pause    ? fleet::queue_op::pause
                               : a == queue_action::resume ? fleet::queue_op::resume
                                                           : fleet::queue_op::look;
    queue_.async_queue_states(
        context(), op, tracked([this, done = std::move(done)](fleet::async_answer<std::vector<fleet::queue_state>> s) {
          queue_answer q;
          if (s.error) {
            ++lookup_errors_;
            c_.log->warn("fleet: reading queue {}: {}", queue_.options().name, error_text(s.error));
            q.unavailable = true;
            return done(std::move(q));
          }
          q.view = view_of(fleet::merge_states(std::move(s.value)), queue_.options().name);
          add_recent_rates(q.view);
          done(std::move(q));
        }));
  }

  void replay_dead(std::string id, duration freshness, callback<dead_result> done) override {
    dead_letter_.replay(std::move(id), freshness, std::move(done));
  }
  void delete_dead(std::string id, callback<dead_result> done) override {
    dead_letter_.remove(std::move(id), std::move(done));
  }
  void purge_dead(std::size_t limit, callback<dead_result> done) override {
    dead_letter_.purge(limit, std::move(done));
  }
  void replay_oldest_dead(std::size_t limit, duration freshness, callback<dead_result> done) override {
    dead_letter_.replay_oldest(limit, freshness, std::move(done));
  }

  void list(list_request q, callback<job_page> done) override {
    if (fleet::listed_by_scan(q.state)) {
      std::lock_guard lock(scans_mu_);
      if (!scans_.take(c_.clk.now())) return done(job_page{.too_many = true});
    }
    queue_.async_list(
        context(),
        {.state = std::move(q.state), .cursor = std::move(q.cursor), .count = q.limit, .handler = std::move(q.handler)},
        tracked([this, done = std::move(done)](fleet::async_answer<fleet::job_list> a) {
          job_page page;
          if (a.error) {
            ++lookup_errors_;
            c_.log->warn("fleet: listing jobs: {}", error_text(a.error));
            page.unavailable = true;
            return done(std::move(page));
          }
          page.invalid_cursor = a.value.invalid_cursor;
          for (const fleet::fleet_job& j : a.value.jobs) page.jobs.push_back(view_of(j, broker_now_ms()));
          page.next_cursor = std::move(a.value.next_cursor);
          done(std::move(page));
        }));
  }

  // On the runner's thread, which may wait: each step is one round trip.
  // The broker's record settles each fire once, fleet-wide; the fire's job
  // carries an Idempotency-Key of the schedule and fire time as well.
  void tick_schedule(const schedule& s, callback<schedule_tick> done) override {
    using namespace std::chrono;
    schedule_tick t;
    try {
      const context ctx;  // each call bounded by the connection's io_timeout
      // Schedules' records live in shard 0 (the queue's own keys).
      const fleet::job_queue::schedule_record rec = queue_.shard(0).look_schedule(ctx, s.opts.name);
      const support::wall_time now{microseconds(rec.broker_now_us)};
      const fire_plan plan = plan_fires(s, support::wall_time{milliseconds(rec.settled_ms)}, now);
      t.state.next_fire = plan.next;
      t.state.last_job = rec.last_job;
      if (rec.last_fire_ms > 0) t.state.last_fire = support::wall_time{milliseconds(rec.last_fire_ms)};
      if (!plan.last_due) return done(std::move(t));
      const std::int64_t fire_ms = duration_cast<milliseconds>(plan.last_due->time_since_epoch()).count();
      // A paused queue takes no fire: the one that would run is missed too.
      const std::uint64_t missed = plan.missed + (plan.run && rec.queue_paused ? 1 : 0);
      if (!queue_.shard(0).settle_schedule(ctx, s.opts.name, rec, fire_ms, missed)) return done(std::move(t));
      t.missed = missed;
      t.state.last_fire = plan.last_due;
      if (plan.run && !rec.queue_paused) run_fire(s, plan, fire_ms, rec, t);
    } catch (const std::exception& e) {
      ++lookup_errors_;
      c_.log->warn("fleet: schedule {}: {}", s.opts.name, e.what());
      t.unavailable = true;
    }
    done(std::move(t));
  }

  // The settled fire's job (settle_schedule said this daemon runs it). From
  // here the fire is settled: a broker error counts it missed (or, once its
  // job is in, loses only the record of which job that is), never undoes it.
  void run_fire(const schedule& s, const fire_plan& plan, std::int64_t fire_ms,
                const fleet::job_queue::schedule_record& rec, schedule_tick& t) {
    const context ctx;
    try {
      {
        std::optional<fleet::fleet_job> before;
        if (!s.opts.allow_overlap && !rec.last_job.empty()) {
          before = queue_.of_id(rec.last_job).find(ctx, rec.last_job);
        }
        const auto state = before ? jobs::parse_job_state(before->state) : std::nullopt;
        if (state && !jobs::is_final(*state)) {
          t.skipped_overlap = 1;
        } else if (const handler_entry* e = c_.find_handler(s.opts.handler)) {
          new_job job;
          auto in = fire_input(*e, s.opts.body, s.opts.content_type);
          in->idempotency_key = "schedule:" + s.opts.name + ":" + std::to_string(fire_ms);
          job.in = std::move(in);
          job.headers_at = c_.clk.now();
          job.freshness = plan.fresh_for;
          std::promise<created> answer;
          create(std::move(job), [&answer](created c) { answer.set_value(std::move(c)); });
          const created c = answer.get_future().get();
          if (c.verdict == created::kind::accepted || c.verdict == created::kind::duplicate) {
            t.enqueued = c.verdict == created::kind::accepted ? 1 : 0;
            t.state.last_job = c.job.id;
            queue_.shard(0).schedule_ran(ctx, s.opts.name, c.job.id);
          } else {
            t.missed += 1;  // refused at admission, or the broker went away: this fire will not run
          }
        }
      }
    } catch (const std::exception& e) {
      ++lookup_errors_;
      c_.log->warn("fleet: schedule {}, its fire settled here: {}", s.opts.name, e.what());
      if (t.enqueued == 0 && t.skipped_overlap == 0) t.missed += 1;
    }
  }

  void drain(time_point deadline) override { consumers_.drain(deadline); }

  void write_metrics(exposition_writer& w) const override {
    const fleet::consumer_stats s = consumers_.stats();
    w.gauge("hourglass_fleet_backlog", "Entries of the queue not yet delivered to any daemon.", s.backlog);
    w.gauge("hourglass_fleet_pending", "Entries delivered to a daemon and not finished.", s.pending);
    w.gauge("hourglass_fleet_scheduled",
            "Jobs in the delayed set: delayed jobs, retries and waits with a wake time or limit.", s.scheduled);
    w.gauge("hourglass_fleet_paused", "1 while the queue is paused (at this daemon's last renewal): nothing is read.",
            s.paused ? 1 : 0);
    w.counter("hourglass_fleet_reclaimed_total",
              "Jobs this daemon took over from a dead daemon (or from its own earlier life).", s.reclaimed);
    w.counter("hourglass_fleet_dead_lettered_total",
              "Jobs dead-lettered after --max-deliveries starts whose workers died.", s.dead_lettered);
    w.counter("hourglass_fleet_dead_dropped_total",
              "Dead-list entries dropped past --dead-max by this daemon's dead-letterings (their jobs can no "
              "longer be listed or replayed from it).",
              s.dead_dropped);
    w.counter("hourglass_fleet_outcomes_refused_total",
              "Outcomes the broker refused for good (an error reply, alone): recorded as error/outcome_refused, "
              "or dropped when even that was refused; the rest are written meanwhile.",
              s.outcomes_refused);
    w.counter("hourglass_fleet_duplicate_outcomes_total",
              "Second completions of a job (counted, not stored: the first outcome wins).", s.duplicate_outcomes);
    w.counter("hourglass_fleet_lost_entries_total",
              "Loss alarm: pending entries whose data was deleted from the stream.", s.lost_entries);
    w.counter("hourglass_fleet_negative_job_ages_total",
              "Entries whose id was newer than the broker's TIME (its clock stepped back): judged as just added.",
              s.negative_ages);
    // Whole microseconds, written as exact decimal seconds ("-0.0025", never "-2.5e-03").
    w.gauge("hourglass_fleet_broker_clock_offset_seconds",
            "The broker's wall clock minus this daemon's (informational; never used to decide).",
            metric_value::seconds(std::chrono::microseconds(s.broker_clock_offset_us)));
    constexpr std::string_view errors = "hourglass_fleet_broker_errors_total";
    w.family(errors, metric_type::counter, "Broker calls that failed, by operation.");
    w.sample(errors, {{"op", "enqueue"}}, enqueue_errors_.load());
    w.sample(errors, {{"op", "lookup"}}, lookup_errors_.load());
    w.sample(errors, {{"op", "consume"}}, s.broker_errors);
  }

 private:
  // One reader connection per shard: a blocking read each.
  std::vector<std::unique_ptr<fleet::redis_client>> readers(core& c) {
    std::vector<std::unique_ptr<fleet::redis_client>> each;
    for (std::size_t i = 0; i < queue_.size(); ++i) each.push_back(connect_fleet_broker(c, broker_, "reads"));
    return each;
  }
  // The process's consumer: its workers and prefetch, shared among the
  // shards by their backlog (sharded_consumer.hpp).
  fleet::consumer_options consumer_settings(core& c) {
    fleet::consumer_options o;
    o.name = consumer_name_;
    o.slots = c.jobs->workers();
    o.prefetch = c.opts.prefetch;
    o.lease = c.opts.lease;
    o.max_deliveries = static_cast<unsigned>(c.opts.max_deliveries);
    o.metrics = &c.jobs->stats();
    o.judge_freshness = !c.fifo();
    o.log = [&c](const std::string& line) { c.log->warn("{}", line); };
    return o;
  }
  // The job as the broker takes it; or, when it cannot be sent, the answer.
  std::optional<created> spec_of(const new_job& job, fleet::job_spec& spec) const {
    const job_input& in = *job.in;
    if (std::optional<created> bad = idempotency_key_refusal(in)) return bad;
    const std::string_view key = in.idempotency_key ? std::string_view(*in.idempotency_key) : std::string_view();
    const handler_entry& e = *in.entry;
    spec.handler = e.name;
    spec.payload = in.body;
    if (!in.content_type.empty()) spec.content_type = in.content_type;
    spec.min_budget = e.min_budget;
    spec.idempotency_key = std::string(key);
    spec.admission = !c_.fifo();  // fifo: every deadline check off, in the fleet too
    spec.parent = job.parent;
    spec.retry = job.retry;
    // The freshness bound and the overall deadline count from the headers'
    // arrival, as for local jobs.
    const duration spent = elapsed(job.headers_at, c_.clk.now());
    if (job.freshness != duration::max())
      spec.freshness = spent >= job.freshness ? duration::zero() : job.freshness - spent;
    if (job.deadline != never)
      spec.deadline = job.deadline > c_.clk.now() ? job.deadline - c_.clk.now() : duration::zero();
    // A delay counts from the headers' arrival too; a Job-Not-Before is
    // compared with the broker's TIME by the enqueue script.
    spec.delay = job.delay > spent ? job.delay - spent : duration::zero();
    if (job.not_before) spec.not_before_us = job.not_before->time_since_epoch().count();
    if (spec.delay > duration::zero() && spec.deadline != duration::max() &&
        (spec.deadline <= spec.delay || spec.deadline - spec.delay <= spec.min_budget)) {
      created refused;  // it could never start in time
      refused.verdict = created::kind::refused;
      refused.refusal = status::expired(expiry_stage::admission);
      refused.note = "its delay leaves less than its minimum budget before Job-Deadline";
      return refused;
    }
    return std::nullopt;
  }

  // Each read of the queue is a sample of the fleet's totals; the view
  // gets their rates over the last minute and 5 minutes from the samples.
  void add_recent_rates(queue_view& v) {
    const time_point now = c_.clk.now();
    std::lock_guard lock(totals_mu_);
    totals_.add(now, v.totals);
    for (const duration w : {duration(std::chrono::minutes(1)), duration(std::chrono::minutes(5))}) {
      if (const auto r = totals_.over(w, now)) {
        v.recent.push_back({std::chrono::duration<double>(r->window).count(),
                            std::chrono::duration<double>(r->span).count(), r->per_second});
      }
    }
  }

  // The broker's answer to an enqueue, as the store's.
  void on_enqueued(const handler_entry& e, duration asked, duration left, fleet::async_answer<fleet::enqueued> a,
                   const callback<created>& done) {
    created out;
    if (a.error) {
      ++enqueue_errors_;
      c_.log->warn("fleet: enqueue of a {} job refused, broker unavailable: {}", e.name, error_text(a.error));
      out.verdict = created::kind::refused;
      out.refusal = status::rejected(reject_reason::broker_unavailable);
      out.note = "broker unavailable";
      return done(std::move(out));
    }
    out = created_of(a.value, asked, left);
    if (out.verdict == created::kind::accepted) {
      // Admitted here, on the daemon that promised it; its outcome is counted
      // by the daemon that records it (fleet-wide: admitted = finished + in flight).
      c_.jobs->stats().on_admitted(*e.metrics, asked);
    }
    if (out.verdict != created::kind::duplicate) return done(std::move(out));
    // A repeat: the first job's state now, so a repeat of a finished job says
    // so. The id is what the client needs; should the read fail, it can GET.
    const std::string first = out.job.id;
    queue_.async_find(
        context(), first,
        tracked([out = std::move(out), done](fleet::async_answer<std::optional<fleet::fleet_job>> f) mutable {
          if (!f.error && f.value) out.job.state = f.value->state;
          done(std::move(out));
        }));
  }

  found found_of(const std::exception_ptr& error, const std::optional<fleet::fleet_job>& j, const char* op,
                 const std::string& id) {
    found f;
    if (error) {
      ++lookup_errors_;
      c_.log->warn("fleet: {} of job {}: {}", op, id, error_text(error));
      f.verdict = found::kind::unavailable;
      return f;
    }
    if (!j) return f;
    f.verdict = found::kind::found;
    f.job = view_of(*j, broker_now_ms());
    return f;
  }

  // The broker's clock now, as this daemon's consumer last measured it
  // (--produce-only: our wall clock; a due_in_ms only, never a decision).
  std::int64_t broker_now_ms() const {
    const auto ours = std::chrono::duration_cast<std::chrono::microseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
    return (ours + consumers_.stats().broker_clock_offset_us) / 1000;
  }

  core& c_;
  support::broker_url broker_;
  std::unique_ptr<fleet::redis_client> commands_;
  fleet::sharded_queue queue_;
  std::string consumer_name_;
  fleet::sharded_consumer consumers_;  // a consumer per shard
  calls_in_flight calls_;              // the producer's
  std::atomic<std::uint64_t> enqueue_errors_{0};
  std::atomic<std::uint64_t> lookup_errors_{0};
  fleet_dead_letter dead_letter_{c_, queue_, calls_, lookup_errors_};
  std::mutex totals_mu_;  // queue reads answer on the I/O threads
  totals_history totals_;
  std::mutex scans_mu_;  // listings start on any I/O thread
  request_bucket scans_{static_cast<double>(c_.opts.max_list_scans)};
};

}  // namespace

std::unique_ptr<job_store> make_fleet_job_store(core& c, std::uint16_t port) {
  return std::make_unique<fleet_job_store>(c, port);
}

}  // namespace hourglass::server::detail
