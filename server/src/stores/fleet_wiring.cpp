#include "stores/fleet_wiring.hpp"

#include <unistd.h>

#include "core/child_jobs.hpp"
#include "core/handler_errors.hpp"
#include "core/person_wait.hpp"
#include "core/stream_output.hpp"
#include "hourglass/fleet/redis_cluster.hpp"
#include "hourglass/support/secret_file.hpp"

namespace hourglass::server::detail {

std::unique_ptr<fleet::redis_client> connect_fleet_broker(core& c, const support::broker_url& u, const char* role) {
  const std::string password = c.opts.broker_password_file.empty()
                                   ? std::string()
                                   : support::read_secret_file(c.opts.broker_password_file, "--broker-password-file");
  std::vector<fleet::redis_endpoint> nodes;
  for (const support::redis_url& n : u.nodes) nodes.push_back({n.host, n.port, n.db, password});
  fleet::redis_options r;
  r.clock = &c.clk;
  r.on_state_change = [&c, role](const std::string& line) { c.log->warn("fleet ({}): {}", role, line); };
  return fleet::connect_broker(c.io, u.cluster, std::move(nodes), std::move(r));
}

fleet::job_runner fleet_runner(core& c) {
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
    v.job_id = j.id;
    std::vector<child_outcome> children;
    v.woke_by = j.woke_by;
    if (j.woke_by == "signal") {
      v.signal_name = signal_of_rule(j.wait_rule).value_or(std::string_view());
      v.signal_payload = j.signal_payload;
    } else if (!j.woke_by.empty()) {
      children = children_at_wake(c, j.id);
      v.children = children;
    }
    handler_result hr = e->fn(ctx, v);
    check_wait(hr);
    check_stored_result(hr, c.opts.max_result);
    fleet::job_output out{std::move(hr.body), std::move(hr.content_type)};
    // The wait ends `keep` before the job's deadline, judged on the broker's clock.
    if (hr.wait) out.wait = fleet::wait_request{fan_in_text(*hr.wait), wake_keep(*hr.wait, e->min_budget)};
    // A person's wait: its own limit, from the broker's TIME when the finish records it.
    if (hr.signal) out.wait = fleet::wait_request{signal_rule(hr.signal->name), hr.signal->limit};
    return out;
  };
  r.describe_error = [](std::exception_ptr p) {
    const error_info i = describe_error(p);
    return fleet::error_record{i.http_status, i.code, i.message, i.retryable};
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

std::string this_host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace hourglass::server::detail
