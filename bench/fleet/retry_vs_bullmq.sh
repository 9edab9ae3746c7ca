#!/usr/bin/env bash
# Retries past the deadline: how many attempts does each system run after the
# job's result is useless? hourglass (hourglassd in fleet mode) against BullMQ 6
# (npm), on one redis-server of this script's own (bench/fleet/own_redis.sh: a
# free loopback port, nothing on disk).
# The scenario, the same for both: JOBS jobs enqueued at once, each of which
# always fails; retry policy 5 attempts in all, exponential backoff from 500 ms;
# an overall deadline 2 s after enqueue. An attempt that STARTS after its job's
# deadline is useless (nobody waits for its result any more).
#   hourglass: hourglassd --broker --workers 10 calling
#     bench/fleet/peers/attempt_recorder.py (answers every POST 503 and logs its
#     arrival time and the body's "deadline"), with --breaker-failures 1000000
#     and the recorder given JOBS times, as upstreams flaky0 ... flaky<JOBS-1>,
#     one a job: the circuit breaker also opens on half of at least 20 calls
#     in 10 s (no flag changes that), which one shared upstream reaches at
#     once; one a job, no breaker sees more than 5 calls, so only the retry
#     rule decides. Each job i: POST /v1/jobs/call with Prefer:
#     respond-async, Job-Attempts: 5, Job-Backoff: 500m, Job-Deadline: 2S and
#     body {"upstream": "flaky<i>", "handler": "x", "body": {"deadline":
#     <enqueue epoch s + 2>}}, all JOBS sent together (50 connections); then GET
#     /v1/jobs/{id} until every job is final (60 s at most). Attempts: the
#     recorder's lines. hourglass's backoff has full jitter (retry n waits
#     uniform in [0, min(cap, 500 ms * 2^(n-1)))), and it schedules a retry
#     only if its due time + the predicted wait + the handler's minimum budget
#     comes before the deadline; otherwise the job ends deadline_exceeded,
#     stage retry.
#   BullMQ: bench/fleet/peers/bullmq_retry.mjs (a Worker of concurrency 10,
#     Queue.addBulk of JOBS jobs with attempts: 5, backoff {type: 'exponential',
#     delay: 500}, data {deadline: Date.now() + 2000}; the processor notes each
#     attempt's start against that deadline, then throws).
# Each round: FLUSHALL, a fresh daemon and recorder, hourglass, then FLUSHALL
# and BullMQ. RUNS rounds; prints one markdown table (per system: jobs,
# attempts in all, attempts started after the deadline, their share), each
# cell the median (min-max) over the rounds, then how the jobs ended.
# Usage: bench/fleet/retry_vs_bullmq.sh [RUNS=3] [JOBS=200]
#   env: HOURGLASSD (default /tmp/hourglassd-bench, else
#   build/release/tools/hourglassd), REDIS_PORT (default: a free one in
#   16400-16499)
# Installs on demand (not in CI): bullmq@6 with its peer dependency ioredis@5
# (npm, into build/peers/bullmq, as bench/fleet/vs_peers.sh does).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
jobs=${2:-200}
daemon=${HOURGLASSD:-/tmp/hourglassd-bench}
[ -x "$daemon" ] || daemon=build/release/tools/hourglassd
[ -x "$daemon" ] || {
  echo "no hourglassd: cmake --preset release && cmake --build --preset release --target hourglassd" >&2
  exit 2
}
peers=bench/fleet/peers
# shellcheck source=bench/fleet/bullmq_install.sh
source bench/fleet/bullmq_install.sh
export PYTHONDONTWRITEBYTECODE=1

# shellcheck source=bench/fleet/own_redis.sh
source bench/fleet/own_redis.sh
start_own_redis 16400 16500
results=$dir/results.jsonl

fresh() { redis-cli -p "$port" flushall >/dev/null; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}
check_json() {  # WHAT LINE: LINE must be one JSON object
  python3 -c 'import json, sys; json.loads(sys.argv[1])' "$2" 2>/dev/null || {
    echo "$1: no JSON: $2" >&2
    exit 1
  }
}

hourglass_round() {  # ROUND: one hourglass run, its JSON line into results
  local r=$1 log=$dir/attempts.$1.log portfile=$dir/recorder.$1.port rec_pid d_pid uport hport out
  fresh
  echo "  hourglass" >&2
  : >"$log"
  python3 "$peers/attempt_recorder.py" 0 "$log" >"$portfile" &
  rec_pid=$!
  for _ in $(seq 100); do [ -s "$portfile" ] && break; sleep 0.05; done
  uport=$(head -n 1 "$portfile")
  [ -n "$uport" ] || { echo "attempt_recorder.py did not start" >&2; exit 1; }
  hport=$(free_port)
  local upstreams=()
  for i in $(seq 0 $((jobs - 1))); do upstreams+=(--upstream "flaky$i=http://127.0.0.1:$uport"); done
  "$daemon" --listen "127.0.0.1:$hport" --broker "$url" --workers 10 \
    "${upstreams[@]}" --breaker-failures 1000000 --log-level warn \
    >"$dir/hourglassd.$r.log" 2>&1 &
  d_pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$hport/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$hport/healthz" >/dev/null || { cat "$dir/hourglassd.$r.log" >&2; exit 1; }
  out=$(python3 - "http://127.0.0.1:$hport" "$jobs" "$log" <<'EOF'
import collections, concurrent.futures, http.client, json, math, sys, time, urllib.parse, urllib.request
base, jobs, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
headers = {"Prefer": "respond-async", "Job-Attempts": "5", "Job-Backoff": "500m", "Job-Deadline": "2S",
           "Content-Type": "application/json"}

def submit(i):  # (id, the deadline sent, when the 202 came)
    deadline = round(time.time() + 2, 6)  # as the recorder writes it back
    body = json.dumps({"upstream": f"flaky{i}", "handler": "x", "body": {"deadline": deadline}}).encode()
    req = urllib.request.Request(f"{base}/v1/jobs/call", data=body, headers=headers, method="POST")
    with urllib.request.urlopen(req, timeout=30) as resp:
        if resp.status != 202:
            sys.exit(f"submit: {resp.status} {resp.read()!r}")
        return json.loads(resp.read())["id"], deadline, time.time()

t0 = time.time()
with concurrent.futures.ThreadPoolExecutor(max_workers=min(jobs, 50)) as pool:
    sent = list(pool.map(submit, range(jobs)))
submitted_s = time.time() - t0
ids = [i for i, _, _ in sent]
acked = {d: a for _, d, a in sent}  # the daemon's Job-Deadline is 2 s after a moment in [sent, acked]
ack_ms_max = max((a - (d - 2)) * 1000 for _, d, a in sent)

u = urllib.parse.urlsplit(base)
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
final, pending = {}, set(ids)
while pending and time.time() - t0 < 60:
    for i in list(pending):
        conn.request("GET", f"/v1/jobs/{i}")
        resp = conn.getresponse()
        job = json.loads(resp.read())
        if resp.status == 200 and job["state"] not in ("queued", "running", "scheduled"):
            final[i] = job
            pending.discard(i)
    if pending:
        time.sleep(0.1)
seconds = time.time() - t0

attempts = useless = useless_after_ack = 0
late_max = 0.0
for line in open(log):
    arrival, deadline = map(float, line.split())
    attempts += 1
    if not arrival <= deadline:  # a NaN deadline counts as late: it should not happen
        useless += 1
        late_max = max(late_max, (arrival - deadline) * 1000 if not math.isnan(deadline) else 0)
        if not arrival <= acked.get(deadline, math.nan) + 2:
            useless_after_ack += 1
ended = collections.Counter(j["state"] + ("/" + j["stage"] if "stage" in j else "") for j in final.values())
per_job = collections.Counter(str(j.get("attempt", 1)) for j in final.values())
print(json.dumps({"system": "hourglass", "jobs": jobs, "finished": len(final), "timed_out": bool(pending),
                  "attempts": attempts, "useless": useless, "useless_after_ack": useless_after_ack,
                  "ack_ms_max": ack_ms_max,
                  "attempts_recorded_by_jobs": sum(j.get("attempt", 1) for j in final.values()),
                  "late_ms_max": late_max, "seconds": seconds, "submit_seconds": submitted_s,
                  "ended": dict(ended), "attempts_per_job": dict(per_job)}))
EOF
)
  kill "$d_pid" 2>/dev/null || true
  wait "$d_pid" 2>/dev/null || true
  kill "$rec_pid" 2>/dev/null || true
  wait "$rec_pid" 2>/dev/null || true
  check_json hourglass "$out"
  echo "$out" >>"$results"
}

bullmq_round() {
  local out
  fresh
  echo "  bullmq" >&2
  out=$(node "$peers/bullmq_retry.mjs" "$url" "$jobs" 10 | tail -n 1)
  check_json bullmq "$out"
  echo "$out" >>"$results"
}

for r in $(seq "$runs"); do
  echo "round $r of $runs" >&2
  hourglass_round "$r"
  bullmq_round
done

python3 - "$results" "$runs" "$jobs" "$(node -p "require('$bullmq_dir/node_modules/bullmq/package.json').version")" <<'EOF'
import collections, json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs, jobs, bullmq_version = sys.argv[2:]
names = {"hourglass": "hourglass", "bullmq": "BullMQ " + ".".join(bullmq_version.split(".")[:2])}

def cell(values, fmt="{:.0f}"):
    m = fmt.format(statistics.median(values))
    lo, hi = fmt.format(min(values)), fmt.format(max(values))
    return m if lo == hi else f"{m} ({lo}–{hi})"

print(f"{runs} rounds, {jobs} jobs each, every attempt fails; 5 attempts, exponential backoff from 500 ms, "
      "deadline 2 s after enqueue: median (min–max)\n")
print("| system | jobs | attempts in all | attempts started after the deadline (useless) | useless share |")
print("|---|---|---|---|---|")
for s in names:
    r = [x for x in rows if x["system"] == s]
    if r:
        print(f"| {names[s]} | {cell([x['finished'] for x in r])} | {cell([x['attempts'] for x in r])} "
              f"| {cell([x['useless'] for x in r])} "
              f"| {cell([100 * x['useless'] / x['attempts'] for x in r], '{:.1f}')} % |")
print()
for s in names:
    r = [x for x in rows if x["system"] == s]
    if any(x["timed_out"] for x in r):
        print(f"{names[s]}: some rounds timed out before every job was final")
    if any(x["attempts"] != x["attempts_recorded_by_jobs"] for x in r):
        print(f"{names[s]}: attempts that reached the handler {[x['attempts'] for x in r]}, "
              f"the jobs' own attempt counts {[x['attempts_recorded_by_jobs'] for x in r]}")
    print(f"{names[s]}: latest useless start {max(x['late_ms_max'] for x in r):.0f} ms past the deadline; "
          f"all final after {cell([x['seconds'] for x in r], '{:.1f}')} s")
    if s == "hourglass":
        print(f"  useless by the submitter's stamp {[x['useless'] for x in r]}; also after the 202 + 2 s "
              f"(surely past the daemon's Job-Deadline) {[x['useless_after_ack'] for x in r]}; "
              f"slowest 202 {max(x['ack_ms_max'] for x in r):.0f} ms after its stamp")
        ended, per_job = collections.Counter(), collections.Counter()
        for x in r:
            ended.update(x["ended"])
            per_job.update(x["attempts_per_job"])
        print(f"  how jobs ended (all rounds): {dict(ended)}; attempts a job: {dict(sorted(per_job.items()))}")
    else:
        by = collections.defaultdict(lambda: [0, 0])
        for x in r:
            for n, v in x["by_attempt"].items():
                by[n][0] += v["started"]
                by[n][1] += v["useless"]
        print("  by attempt (all rounds), started/useless: "
              + ", ".join(f"{n}: {v[0]}/{v[1]}" for n, v in sorted(by.items(), key=lambda kv: int(kv[0]))))
EOF
