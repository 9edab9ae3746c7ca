// A sync job on its connection: submitted to the executor, answered at its
// deadline on the daemon's clock, cancelled when its caller goes away, its
// one outcome answered or logged. Every decision is the call's state machine
// (request_rules.hpp); this file does what it says.
#include <boost/asio/post.hpp>

#include <optional>
#include <utility>

#include "http/session.hpp"
#include "http/sync_call.hpp"

namespace hourglass::server::detail {

namespace net = boost::asio;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t watch_limit = 64 * 1024;  // pipelined bytes buffered while a job runs
constexpr auto answer_grace = 100ms;            // a running handler's time to stop after its deadline

// An outcome delivered on this thread while it is still inside submit (a job
// it ran itself, run_inline, or one the queue refused): handed back to
// submit_sync rather than posted to the strand it is already on.
struct outcome_in_submit {
  const void* call;
  std::optional<job_result<handler_result>> result;
};
thread_local outcome_in_submit* submitting = nullptr;

class submitting_scope {  // sets `submitting` for one submit, restored even if it throws
 public:
  explicit submitting_scope(outcome_in_submit& here) : outer_(std::exchange(submitting, &here)) {}
  ~submitting_scope() { submitting = outer_; }
  submitting_scope(const submitting_scope&) = delete;
  submitting_scope& operator=(const submitting_scope&) = delete;

 private:
  outcome_in_submit* outer_;
};

}  // namespace

void session::submit_sync(std::shared_ptr<job_input> in) {
  phase_ = phase::job;
  auto call = std::make_shared<sync_call>();
  call->entry = entry_;
  call->budget = budget_;
  call->deadline = saturating_add(headers_at_, budget_);  // the budget started when the headers arrived
  if (entry_->stream) call->out = std::make_shared<output_channel>();
  call_ = call;
  io_timer_.expires_never();

  job_options o;
  o.metrics = entry_->metrics;
  o.deadline = call->deadline;
  o.min_budget = entry_->min_budget;
  o.idle_limit = in->idle_limit;
  // Told of the first bytes before the job can write them: the strand hears
  // of them before it hears of the outcome.
  if (call->out) notify_when_readable(call);
  o.run_here_when_idle = entry_->run_inline && !call->out;
  call->submitted_at = core_.clk.now();
  outcome_in_submit here{call.get(), std::nullopt};
  {
    const submitting_scope in_submit(here);
    call->ref = core_.jobs->submit(
        o, [in, call](const context& ctx) { return run_sync_job(ctx, *in, *call); },
        [self = shared_from_this(), call](job_result<handler_result>&& r) noexcept {
          if (submitting != nullptr && submitting->call == call.get()) {
            submitting->result.emplace(std::move(r));
            return;
          }
          net::post(self->strand_, [self, call, r = std::move(r)]() mutable { self->on_job_done(call, std::move(r)); });
        });
  }
  if (here.result)
    return on_job_done(call, std::move(*here.result));  // no deadline to keep, no disconnect to watch for

  // Answered at the deadline on the clock the executor expires jobs on.
  if (!core_.fifo() && call->deadline != never) {
    deadline_timer_.arm(call->deadline, [self = shared_from_this(), call] { self->on_deadline(call); });
  }
  watch();
}

// While a job waits or runs, keep reading: a disconnect cancels the job.
void session::watch() {
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this()](error_code ec, std::size_t n) { self->on_watch(ec, n); });
}

void session::on_watch(error_code ec, std::size_t n) {
  ec = seen(ec);
  watching_ = false;
  if (!ec) buffer_.commit(n);
  const bool open_call = phase_ == phase::job && call_ && still_open(call_->state);
  if (open_call) {
    if (!ec) {
      if (buffer_.size() < watch_limit) watch();  // pipelined bytes: keep them for later
      return;
    }
    if (ec == net::error::operation_aborted) return;
    step(call_, sync_event::peer_gone);  // eof or reset: the caller went away
    return;                              // the outcome arrives through on_job_done
  }
  if (ec && ec != net::error::operation_aborted) close_after_ = true;
  maybe_continue();
}

void session::stop_watching() {
  if (!watching_) return;
  error_code ignored;
  stream_.cancel(ignored);
}

void session::on_deadline(const std::shared_ptr<sync_call>& call) {
  if (call != call_ || phase_ == phase::closed) return;
  if (call->state == sync_state::grace || call->state == sync_state::stream_grace) {
    return step(call, sync_event::grace_over);
  }
  auto expected = job_phase::queued;
  // Not started yet: it never will be (the job sees `abandoned` and stops).
  const bool abandoned = call->phase.compare_exchange_strong(expected, job_phase::abandoned);
  step(call, abandoned ? sync_event::deadline_while_queued : sync_event::deadline_while_running);
}

void session::on_job_done(const std::shared_ptr<sync_call>& call, job_result<handler_result>&& r) {
  call->ref = job_ref();  // the job record holds `call` (and this session): break the cycle
  const sync_event e = outcome_event(phase_ == phase::closed, call->out != nullptr, r.st.is_ok());
  call->result = std::move(r);
  step(call, e);
}

// Feeds the call's state machine (request_rules.hpp) and does what it says.
void session::step(const std::shared_ptr<sync_call>& call, sync_event e) {
  const sync_step next = on_sync_event(call->state, e);
  call->state = next.next;
  switch (next.action) {
    case sync_action::none: return;
    case sync_action::cancel_job:
      deadline_timer_.cancel();
      call->ref.cancel(cancel_cause::caller_gone);
      // After the cancel: a write woken by the close then finds its context stopped.
      if (call->out) call->out->close();
      return;
    case sync_action::start_stream: return begin_stream(call, true);
    case sync_action::end_stream_expired: {  // a handler that ignores its context: the stream ends without it
      call->early_status = 200;
      return end_stream(call, status::expired(expiry_stage::run), call->timings_so_far(core_.clk.now()));
    }
    case sync_action::arm_grace:  // running: its context has fired; give the handler a moment to stop
      deadline_timer_.arm(saturating_add(core_.clk.now(), answer_grace),
                          [self = shared_from_this(), call] { self->on_deadline(call); });
      return;
    case sync_action::answer_expired_queue:
    case sync_action::answer_expired_run: {
      const status st = status::expired(next.action == sync_action::answer_expired_queue ? expiry_stage::queue
                                                                                         : expiry_stage::run);
      call->early_status = 504;
      stop_watching();
      const job_timings t = call->timings_so_far(core_.clk.now());
      return send(job_response(st, t, call->budget, duration::zero(), nullptr, nullptr));
    }
    case sync_action::answer_outcome:
    case sync_action::log_outcome:
    case sync_action::log_caller_gone:
    case sync_action::end_stream: break;
  }
  // The outcome is in.
  job_result<handler_result>& r = *call->result;
  // Only an error has one (its default strings are an allocation per request).
  std::optional<error_info> err;
  if (r.st.code == outcome::error) err = describe_error(r.error);
  job_report rep{call->entry->name, "sync", call->budget, r.timings, r.st, 0};
  if (err) rep.note = err->detail;
  if (next.action == sync_action::log_outcome) {  // answered at the deadline already
    rep.http_status = call->early_status;
    core_.log_job(rep);
    return;
  }
  deadline_timer_.cancel();
  if (next.action == sync_action::end_stream) {  // a stream that wrote nothing begins here, to end with its trailers
    rep.http_status = 200;
    core_.log_job(rep);
    if (!call->stream_started) begin_stream(call, false);
    return end_stream(call, r.st, r.timings);
  }
  stop_watching();
  if (next.action == sync_action::log_caller_gone) {
    rep.http_status = 499;
    core_.log_job(rep);
    close_after_ = true;
    return maybe_continue();
  }
  const duration left = remaining(call->deadline, core_.clk.now());
  response res = job_response(r.st, r.timings, call->budget, left, r.result ? &*r.result : nullptr,
                              err ? &*err : nullptr);
  rep.http_status = res.result_int();
  core_.log_job(rep);
  send(std::move(res));
}

}  // namespace hourglass::server::detail
