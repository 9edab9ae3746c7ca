// hourglassd --broker: async jobs on the fleet's durable queue (docs/fleet.md;
// keys and scripts: docs/reference/fleet-layout.md). Producer calls (enqueue,
// GET, DELETE) run on a small pool of broker threads, never on an I/O thread;
// the fleet consumer feeds this daemon's share of the queue into its executor
// and runs the handlers.
#include "fleet_backend.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <fmt/format.h>

#include "core.hpp"
#include "hourglass/fleet/consumer.hpp"
#include "hourglass/fleet/job_queue.hpp"
#include "hourglass/fleet/redis.hpp"
#include "hourglass/support/json.hpp"
#include "hourglass/support/url.hpp"
#include "hourglass/utf8.hpp"
#include "job_input.hpp"
#include "request_rules.hpp"
#include "secret_file.hpp"

namespace hourglass::server::detail {

namespace http = boost::beast::http;

namespace {

double millis_field(std::string_view text) {
  try {
    return text.empty() ? 0.0 : std::stod(std::string(text));
  } catch (const std::exception&) {
    return 0.0;
  }
}

response broker_unavailable(const std::string& why) {
  response res = error_response(503, "broker_unavailable", "the job broker cannot be reached; nothing was accepted");
  res.set(http::field::retry_after, "1");
  (void)why;
  return res;
}

class fleet_backend final : public async_backend {
 public:
  fleet_backend(core& c, std::uint16_t port)
      : c_(c),
        endpoint_(endpoint_of(c.opts)),
        commands_(c.io, endpoint_, redis_settings(c, "commands")),
        reader_(c.io, endpoint_, redis_settings(c, "reads")),
        queue_(commands_, {.name = c.opts.queue,
                           .result_ttl = c.opts.result_ttl,
                           .idempotency_ttl = c.opts.idempotency_ttl,
                           .clock = &c.clk}),
        consumer_(queue_, reader_, *c.jobs, runner(c), consumer_settings(c, port)),
        pool_(2) {}

  ~fleet_backend() override {
    consumer_.stop();
    pool_.join();
  }

  void start() override {
    consumer_.start(context());
    c_.log->info("fleet: consuming queue {} on {}:{} as {}", c_.opts.queue, endpoint_.host, endpoint_.port,
                 consumer_name_);
  }

  void submit(std::shared_ptr<const job_input> in, time_point headers_at, duration freshness, reply done) override {
    const std::string_view key = in->msg["Idempotency-Key"];
    if (in->msg.count("Idempotency-Key") != 0 && !valid_idempotency_key(key)) {
      return done(error_response(400, "invalid_idempotency_key", "Idempotency-Key must be 1-128 printable ASCII"));
    }
    boost::asio::post(pool_, [this, in = std::move(in), headers_at, freshness, done = std::move(done)] {
      done(enqueue(*in, headers_at, freshness));
    });
  }

  void lookup(std::string id, bool cancel, reply done) override {
    boost::asio::post(pool_, [this, id = std::move(id), cancel, done = std::move(done)] {
      try {
        bool cancelled_here = false;
        const std::optional<fleet::fleet_job> j = cancel ? queue_.cancel(context(), id, &cancelled_here)
                                                         : queue_.find(context(), id);
        if (!j) return done(error_response(404, "not_found", "no such job (unknown, or expired)"));
        if (cancelled_here) {  // this daemon recorded its outcome: counted here, as the consumers count theirs
          c_.jobs->stats().on_recorded(c_.jobs->handler(j->field("handler")),
                                       status::cancelled(cancel_cause::requested));
        }
        const std::string_view state = j->state();
        const bool finished = state != "queued" && state != "running";
        response res = make_response(cancel && !finished ? 202 : 200, fleet_job_json(*j), json_type);
        if (finished) res.set("Server-Timing", server_timing(timings_of(*j)));
        res.set(http::field::cache_control, "no-store");
        done(std::move(res));
      } catch (const std::exception& e) {
        ++lookup_errors_;
        c_.log->warn("fleet: {} of job {}: {}", cancel ? "cancel" : "lookup", id, e.what());
        done(broker_unavailable(e.what()));
      }
    });
  }

  void drain(time_point deadline) override { consumer_.drain(deadline); }

  void write_metrics(exposition_writer& w) const override {
    const fleet::consumer_stats s = consumer_.stats();
    w.gauge("hourglass_fleet_backlog", "Entries of the queue not yet delivered to any daemon.", s.backlog);
    w.gauge("hourglass_fleet_pending", "Entries delivered to a daemon and not finished.", s.pending);
    w.counter("hourglass_fleet_reclaimed_total",
              "Jobs this daemon took over from a dead daemon (or from its own earlier life).", s.reclaimed);
    w.counter("hourglass_fleet_dead_lettered_total",
              "Jobs dead-lettered after --max-deliveries starts whose workers died.", s.dead_lettered);
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
  static fleet::redis_endpoint endpoint_of(const server_options& o) {
    const support::redis_url u = support::parse_redis_url(o.broker, "--broker");
    return {u.host, u.port, u.db,
            o.broker_password_file.empty() ? std::string()
                                           : read_secret_file(o.broker_password_file, "--broker-password-file")};
  }
  static fleet::redis_options redis_settings(core& c, const char* role) {
    fleet::redis_options r;
    r.clock = &c.clk;
    r.on_state_change = [&c, role](const std::string& line) { c.log->warn("fleet ({}): {}", role, line); };
    return r;
  }
  fleet::consumer_options consumer_settings(core& c, std::uint16_t port) {
    fleet::consumer_options o;
    consumer_name_ = c.opts.consumer.empty() ? host_name() + ":" + std::to_string(port) : c.opts.consumer;
    o.name = consumer_name_;
    o.slots = c.jobs->workers();
    o.lease = c.opts.lease;
    o.max_deliveries = static_cast<unsigned>(c.opts.max_deliveries);
    o.metrics = &c.jobs->stats();
    o.judge_freshness = !c.fifo();
    o.log = [&c](const std::string& line) { c.log->warn("{}", line); };
    return o;
  }
  static std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
    return buf;
  }

  static fleet::job_runner runner(core& c) {
    fleet::job_runner r;
    r.run = [&c](const context& ctx, const fleet::delivered_job& j) {
      const handler_entry* e = c.find_handler(j.handler);
      if (e == nullptr) throw handler_error(404, "unknown_handler", "this daemon has no handler '" + j.handler + "'");
      request_view v;
      v.handler = e->name;
      v.body = j.payload;
      v.content_type = j.content_type;
      v.budget = e->run_limit;
      v.async = true;
      v.idempotency_key = j.idempotency_key;
      handler_result hr = e->fn(ctx, v);
      return fleet::job_output{std::move(hr.body), std::move(hr.content_type)};
    };
    r.describe_error = [](std::exception_ptr p) {
      const error_info i = describe_error(p);
      return fleet::error_record{i.http_status, i.code, i.message};
    };
    r.run_limit = [&c](std::string_view h) {
      const handler_entry* e = c.find_handler(h);
      return e != nullptr ? e->run_limit : c.opts.max_budget;
    };
    // A fleet job carries no request headers to its worker: the handler's own
    // idle limit applies, Job-Idle-Timeout does not travel.
    r.idle_limit = [&c](std::string_view h) {
      const handler_entry* e = c.find_handler(h);
      return e != nullptr ? e->idle_limit : duration::max();
    };
    return r;
  }

  response enqueue(const job_input& in, time_point headers_at, duration freshness) {
    const handler_entry& e = *in.entry;
    fleet::job_spec spec;
    spec.handler = e.name;
    spec.payload = in.msg.body();
    const std::string_view type = in.msg[http::field::content_type];
    if (!type.empty()) spec.content_type = std::string(type);
    spec.min_budget = e.min_budget;
    spec.idempotency_key = std::string(in.msg["Idempotency-Key"]);
    spec.admission = !c_.fifo();  // fifo: every deadline check off, in the fleet too
    // The freshness bound counts from the headers' arrival, as for local jobs.
    if (freshness != duration::max()) {
      const duration spent = elapsed(headers_at, c_.clk.now());
      spec.freshness = spent >= freshness ? duration::zero() : freshness - spent;
    }
    fleet::enqueued r;
    try {
      r = queue_.enqueue(context(), spec);
    } catch (const std::exception& ex) {
      ++enqueue_errors_;
      c_.log->warn("fleet: enqueue of a {} job refused, broker unavailable: {}", e.name, ex.what());
      return c_.refuse(
          {e, "async", status::rejected(reject_reason::broker_unavailable), duration::max(), "broker unavailable"},
          broker_unavailable(ex.what()));
    }
    if (r.verdict == fleet::enqueued::kind::refused) {
      const status st = status::expired(expiry_stage::admission);
      return c_.refuse({e, "async", st}, job_response(st, {}, freshness, spec.freshness, nullptr, nullptr));
    }
    // Admitted here, on the daemon that promised it; its outcome is counted
    // by the daemon that records it (fleet-wide: admitted = finished + in flight).
    if (r.verdict == fleet::enqueued::kind::accepted) c_.jobs->stats().on_admitted(*e.metrics, freshness);
    const std::string location = std::string(jobs_path) + r.id;
    std::string state = "queued";
    if (r.verdict == fleet::enqueued::kind::duplicate) {
      // The first job's state now: a repeat of a finished job says so.
      try {
        if (const auto first = queue_.find(context(), r.id)) state = std::string(first->state());
      } catch (const std::exception&) {  // the id is what the client needs; its state it can GET
      }
    }
    support::json_object body;
    body.add("id", r.id).add("state", state).add("location", location);
    if (r.verdict == fleet::enqueued::kind::duplicate) body.add("duplicate", true);
    response res = make_response(202, body.str(), json_type);
    res.set(http::field::location, location);
    res.set("Server-Timing", server_timing({}));  // nothing spent yet; GET reports the job's own
    return res;
  }

  // What the outcome recorded of the job's time, for Server-Timing.
  static job_timings timings_of(const fleet::fleet_job& j) {
    job_timings t;
    const auto ms = [](std::string_view v) {
      return std::chrono::duration_cast<duration>(std::chrono::duration<double, std::milli>(millis_field(v)));
    };
    t.queue_delay = ms(j.field("queued_ms"));
    t.ran = !j.field("run_ms").empty();
    if (t.ran) t.run_time = ms(j.field("run_ms"));
    t.committed = j.field("committed") == "1";
    return t;
  }

  static std::string fleet_job_json(const fleet::fleet_job& j) {
    support::json_object o;
    o.add("id", j.id).add("handler", j.field("handler"));
    const std::string_view state = j.state();
    o.add("state", state);
    if (!j.field("deliveries").empty()) o.add("deliveries", static_cast<unsigned>(millis_field(j.field("deliveries"))));
    if (!j.field("consumer").empty()) o.add("consumer", j.field("consumer"));  // the daemon that started it last
    if (state == "queued" || state == "running") {
      if (j.field("cancel_requested") == "1") o.add("cancel_requested", true);
      return o.str();
    }
    if (state == "deadline_exceeded") o.add("stage", j.field("stage"));
    if (state == "cancelled" || state == "dead") o.add("cause", j.field("cause"));
    if (state == "rejected") o.add("reason", j.field("reason"));
    if (state == "error") {
      o.add("error", j.field("error")).add("message", j.field("message"));
      o.add("http_status", static_cast<unsigned>(millis_field(j.field("http_status"))));
    }
    if (!j.field("queued_ms").empty()) o.add("queued_ms", millis_field(j.field("queued_ms")));
    if (!j.field("run_ms").empty()) o.add("run_ms", millis_field(j.field("run_ms")));
    if (j.field("committed") == "1") o.add("committed", true);
    if (state == "ok") {
      o.add("content_type", j.field("content_type"));
      const std::string_view result = j.field("result");
      if (valid_utf8(result)) {
        o.add("result", result);
      } else {
        o.add("result_base64", support::base64(result));
      }
    }
    return o.str();
  }

  core& c_;
  fleet::redis_endpoint endpoint_;
  fleet::redis_connection commands_;
  fleet::redis_connection reader_;
  fleet::job_queue queue_;
  std::string consumer_name_;
  fleet::consumer consumer_;
  boost::asio::thread_pool pool_;
  std::atomic<std::uint64_t> enqueue_errors_{0};
  std::atomic<std::uint64_t> lookup_errors_{0};
};

}  // namespace

bool valid_idempotency_key(std::string_view key) noexcept {
  if (key.empty() || key.size() > 128) return false;
  for (const char ch : key) {
    if (ch < 0x20 || ch > 0x7e) return false;
  }
  return true;
}

std::unique_ptr<async_backend> make_fleet_backend(core& c, std::uint16_t port) {
  return std::make_unique<fleet_backend>(c, port);
}

}  // namespace hourglass::server::detail
