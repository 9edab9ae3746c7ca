#include "core/core.hpp"

#include <boost/asio/strand.hpp>
#include <spdlog/sinks/stdout_sinks.h>

#include "hourglass/server/options.hpp"

namespace hourglass::server::detail {

bool connection_registry::add(const std::shared_ptr<session>& s, std::size_t max) {
  std::lock_guard lock(mu_);
  if (sessions_.size() >= max) return false;
  sessions_.emplace(s.get(), s);
  return true;
}

void connection_registry::remove(const session* s) noexcept {
  std::lock_guard lock(mu_);
  if (sessions_.erase(s) != 0 && sessions_.empty()) empty_.notify_all();
}

std::vector<std::shared_ptr<session>> connection_registry::live() {
  std::vector<std::shared_ptr<session>> out;
  std::lock_guard lock(mu_);
  for (auto& [p, w] : sessions_) {
    if (auto s = w.lock()) out.push_back(std::move(s));
  }
  return out;
}

bool connection_registry::wait_empty(std::chrono::steady_clock::duration limit) {
  std::unique_lock lock(mu_);
  return empty_.wait_for(lock, limit, [&] { return sessions_.empty(); });
}

std::size_t connection_registry::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

namespace {

std::shared_ptr<spdlog::logger> make_logger(const std::string& level) {
  auto log = std::make_shared<spdlog::logger>("hourglassd", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  log->set_level(spdlog::level::from_str(level));
  log->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  log->flush_on(spdlog::level::info);
  return log;
}

upstream_client_options client_options(const server_options& o, hourglass::clock& clk) {
  upstream_client_options u;
  u.clock = &clk;
  u.reserve = o.call_reserve;
  u.min_budget = o.min_budget;
  u.io_timeout = o.max_budget;
  u.breaker.consecutive_failures = static_cast<int>(std::min<std::size_t>(o.breaker_failures, 1'000'000));
  u.breaker.open_for = o.breaker_open;
  return u;
}

executor_options executor_settings(const server_options& o, hourglass::clock& clk) {
  executor_options e;
  e.clock = &clk;
  e.workers = o.workers;
  e.queue_capacity = o.queue_capacity;
  e.deadline_checks = o.scheduling == policy::hourglass;
  return e;
}

std::string ms_or_dash(duration d) {
  return d == duration::max() ? std::string("-") : fmt::format("{:.3f}", to_millis(d));
}

}  // namespace

core::core(server_options o, hourglass::clock& c)
    : opts(std::move(o)),
      clk(c),
      log(make_logger(opts.log_level)),
      // One thread runs it: asio may skip some locking around its own queue.
      io(opts.io_threads == 1 ? 1 : BOOST_ASIO_CONCURRENCY_HINT_DEFAULT),
      upstreams(std::make_unique<upstream_client>(io, opts.upstreams, client_options(opts, clk))),
      jobs(std::make_unique<executor>(executor_settings(opts, clk))),
      store(make_memory_job_store(*this)),
      schedules(std::make_unique<schedule_runner>(*this)) {}

boost::asio::any_io_executor core::connection_executor() {
  if (opts.io_threads == 1) return io.get_executor();
  return boost::asio::make_strand(io);
}

const handler_entry* core::find_handler(std::string_view name) const {
  const auto it = handlers.find(name);
  return it == handlers.end() ? nullptr : &it->second;
}

void core::book_refusal(const refusal& r, unsigned http_status) const {
  jobs->stats().on_refused(*r.entry.metrics, r.st);
  log_job({r.entry.name, r.mode, r.budget, {}, r.st, http_status, r.note});
}

void core::log_job(const job_report& r) const {
  if (!log->should_log(spdlog::level::info)) return;
  const status& st = r.st;
  std::string detail;
  if (st.code == outcome::rejected && st.reason != reject_reason::none)
    detail = fmt::format(" reason={}", to_string(st.reason));
  if (st.code == outcome::deadline_exceeded) detail = fmt::format(" stage={}", to_string(st.stage));
  if (st.code == outcome::cancelled) detail = fmt::format(" cause={}", to_string(st.cause));
  if (r.timings.committed) detail += " committed=true";
  std::string note;
  if (!r.note.empty()) {
    note = " note=\"";
    for (const char c : r.note.substr(0, 200)) {
      if (c == '"' || c == '\\') note += '\\';
      note += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
    }
    note += '"';
  }
  log->info(
      "job handler={} mode={} budget_ms={} queue_ms={:.3f} run_ms={:.3f} remaining_at_dispatch_ms={} outcome={}{} "
      "late={} http={}{}",
      r.handler, r.mode, ms_or_dash(r.budget), to_millis(r.timings.queue_delay), to_millis(r.timings.run_time),
      r.timings.ran ? ms_or_dash(r.timings.remaining_at_dispatch) : std::string("-"), to_string(st.code), detail,
      r.timings.completed_late, r.http_status == 0 ? std::string("-") : std::to_string(r.http_status), note);
}

}  // namespace hourglass::server::detail
