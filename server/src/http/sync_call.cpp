#include "http/sync_call.hpp"

#include "core/stream_output.hpp"

namespace hourglass::server::detail {

job_timings sync_call::timings_so_far(time_point now) {
  std::lock_guard lock(running_mu);
  job_timings t;
  t.budget = budget;
  t.queue_delay = elapsed(submitted_at, started_at.value_or(now));
  if (started_at) {
    t.ran = true;
    t.run_time = elapsed(*started_at, now);
  }
  t.committed = running != nullptr ? running->committed() : committed_after_run;  // a change may have happened
  return t;
}

namespace {

// Shows the running context on the call for the handler's run.
class shown_while_running {
 public:
  shown_while_running(sync_call& call, const context& ctx) : call_(call) {
    std::lock_guard lock(call_.running_mu);
    call_.running = &ctx;
    call_.started_at = ctx.get_clock().now();
  }
  ~shown_while_running() {
    std::lock_guard lock(call_.running_mu);
    call_.committed_after_run = call_.running->committed();
    call_.running = nullptr;
  }
  shown_while_running(const shown_while_running&) = delete;
  shown_while_running& operator=(const shown_while_running&) = delete;

 private:
  sync_call& call_;
};

}  // namespace

handler_result run_sync_job(const context& ctx, const job_input& in, sync_call& call) {
  auto expected = job_phase::queued;
  // The client was already answered at the deadline: never run.
  if (!call.phase.compare_exchange_strong(expected, job_phase::running)) {
    throw stopped_error(status::expired(expiry_stage::queue));
  }
  const shown_while_running shown(call, ctx);
  if (call.out) {  // a streaming handler: its bytes go out as they come
    channel_output out(ctx, *call.out);
    in.entry->stream(ctx, in.view(), out);
    return handler_result{{}, in.entry->stream_content_type};
  }
  handler_result r = in.entry->fn(ctx, in.view());
  // Nobody would resume it: its caller is waiting on this very run.
  if (r.wait || r.signal)
    throw handler_error(500, "cannot_wait", "only an async job can wait (for children or a signal)");
  return r;
}

}  // namespace hourglass::server::detail
