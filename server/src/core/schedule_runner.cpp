#include "core/schedule_runner.hpp"

#include <future>

#include "core/core.hpp"
#include "hourglass/support/json.hpp"

namespace hourglass::server::detail {

namespace {

constexpr duration look_every = std::chrono::milliseconds(250);

}  // namespace

schedule_runner::schedule_runner(core& c) : c_(c), stop_(c.clk) {
  for (const schedule_options& o : c.opts.schedules) schedules_.push_back(read_schedule(o));
  for (const schedule& s : schedules_) views_.push_back({&s, {}, 0, 0, 0, false});
}

schedule_runner::~schedule_runner() { stop(); }

void schedule_runner::check_handlers() const {
  for (const schedule& s : schedules_) {
    if (c_.find_handler(s.opts.handler) == nullptr) {
      throw std::invalid_argument("schedule '" + s.opts.name + "': no handler '" + s.opts.handler + "'");
    }
  }
}

void schedule_runner::start() {
  if (schedules_.empty() || thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void schedule_runner::stop() {
  stop_.cancel(cancel_cause::shutdown);
  if (thread_.joinable()) thread_.join();
}

void schedule_runner::loop() {
  const context& ctx = stop_.get();
  while (!ctx.done()) {
    for (std::size_t i = 0; i < schedules_.size() && !ctx.done(); ++i) {
      std::promise<schedule_tick> answer;
      c_.store->tick_schedule(schedules_[i], [&answer](schedule_tick t) { answer.set_value(std::move(t)); });
      const schedule_tick t = answer.get_future().get();
      std::lock_guard lock(mu_);
      view& v = views_[i];
      if (t.unavailable) continue;
      v.looked = true;
      v.state = t.state;
      v.enqueued += t.enqueued;
      v.missed += t.missed;
      v.skipped_overlap += t.skipped_overlap;
    }
    ctx.sleep_for(look_every);
  }
}

std::vector<schedule_runner::view> schedule_runner::views() const {
  std::lock_guard lock(mu_);
  return views_;
}

std::string schedule_runner::json() const {
  const auto ms = [](support::wall_time t) { return support::format_rfc3339(t); };
  support::json_writer w;
  w.begin_object().key("schedules").begin_array();
  for (const view& v : views()) {
    const schedule_options& o = v.s->opts;
    w.begin_object()
        .member("name", o.name)
        .member("cron", o.cron)
        .member("zone", o.zone)
        .member("handler", o.handler)
        .member("overlap", o.allow_overlap ? "allow" : "skip");
    if (o.freshness) w.member("freshness_ms", std::chrono::duration<double, std::milli>(*o.freshness).count());
    if (v.state.last_fire) w.member("last_fire", ms(*v.state.last_fire));
    if (!v.state.last_job.empty()) w.member("last_job", v.state.last_job);
    if (v.state.next_fire) w.member("next_fire", ms(*v.state.next_fire));
    w.key("fires")
        .begin_object()
        .member("enqueued", v.enqueued)
        .member("missed", v.missed)
        .member("skipped_overlap", v.skipped_overlap)
        .end_object();
    w.end_object();
  }
  w.end_array().end_object();
  return w.take() + "\n";  // as every JSON body the daemon writes
}

void schedule_runner::write_metrics(exposition_writer& w) const {
  if (schedules_.empty()) return;
  constexpr std::string_view fires = "hourglass_schedule_fires_total";
  w.family(fires, metric_type::counter,
           "Fires of periodic jobs this daemon settled, by result: enqueued, missed (never run late), "
           "skipped_overlap (the previous fire still running).");
  for (const view& v : views()) {
    const std::string& name = v.s->opts.name;
    w.sample(fires, {{"schedule", name}, {"result", "enqueued"}}, v.enqueued);
    w.sample(fires, {{"schedule", name}, {"result", "missed"}}, v.missed);
    w.sample(fires, {{"schedule", name}, {"result", "skipped_overlap"}}, v.skipped_overlap);
  }
}

}  // namespace hourglass::server::detail
