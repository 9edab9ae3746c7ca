// The built-in handlers (docs/reference/http-api.md, "Built-in handlers"), for
// demos, tests and benchmarks.
// http_server registers them unless server_options::builtin_handlers is off;
// embedders may register them under other names too.
//
//  echo   any bytes        returns them, with the request's Content-Type
//  sleep  {"ms": N}        waits N ms (0..3,600,000) on the job's context (the
//                          daemon's clock): a stop ends the wait at once
//  spin   {"us": N}        burns N µs (0..60,000,000) of CPU, checking the context
//                          between slices far shorter than 100 µs
//  approval {"work_ms": N, "signal": NAME, "wait_ms": W}   (async jobs: a person's wait)
//                          works N ms (0..3,600,000) on the job's context, then waits for
//                          the signal NAME (POST /v1/jobs/{id}/signals/NAME) at most W ms
//                          (1..604,800,000) without a worker, its machine budget standing
//                          still. Resumed by the signal: {"signal": NAME, "payload": the
//                          signal's body as text, "remaining_ms": its machine budget left}
//  fanout {"handler": H, "bodies": [B, ...], "until": U}   (async jobs: fan-in)
//                          enqueues one child job of handler H per body (1 to 100; a
//                          JSON string is sent as its text, any other value as JSON),
//                          each carrying what the fanout has left, and waits for them
//                          without a worker: U "all" (default), "first_success" or an
//                          integer N (the first N to end). Resumed: {"woke_by": W,
//                          "children": [{"id", "state", "result"?}, ...]} in order
//  stream {"chunks": N, "interval_ms": M, "stall_after": K}   (a streaming handler)
//                          writes N lines ("chunk i of N\n", 0 <= N <= 1,000,000) M ms
//                          apart (0..3,600,000, default 0), the first at once; each write
//                          is progress. With stall_after, after K chunks it writes
//                          nothing more and waits for its context to stop (an idle
//                          limit or the deadline), as a stuck producer would.
//  call   {"upstream": NAME, "handler": H, "body": B}
//                          POST B to handler H of the configured upstream NAME with
//                          the remaining budget (upstream_client). B: a JSON string
//                          is sent as its text (application/octet-stream); any other
//                          JSON value as JSON (application/json); absent: empty.
//                          Upstream 2xx -> its body; 504 -> deadline_exceeded/downstream;
//                          404 -> 400 invalid_argument; other -> 500 downstream_error.
// Bad input is a 400 invalid_argument error.
#pragma once

#include "hourglass/server/handler.hpp"
#include "hourglass/server/upstream_client.hpp"

namespace hourglass::server {

handler_fn echo_handler();
handler_fn sleep_handler();
handler_fn spin_handler();
handler_fn approval_handler();
class http_server;
// `srv` enqueues the children (http_server::enqueue_child); it must outlive the handler's jobs.
handler_fn fanout_handler(http_server& srv);
stream_handler_fn stream_handler();
inline constexpr const char* stream_content_type = "text/plain; charset=utf-8";
// client (and ex) must outlive the handler's jobs. With `ex`, a call may be
// hedged: {"upstreams": [A, B, ...], "hedge_after_ms": H} (its branches run on ex).
handler_fn call_handler(upstream_client& client, executor* ex = nullptr);

}  // namespace hourglass::server
