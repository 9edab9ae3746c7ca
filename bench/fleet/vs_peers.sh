#!/usr/bin/env bash
# Fleet mode against the job queues people already run on Redis: Sidekiq 6.4
# (Debian's, hiredis driver), BullMQ 6 (npm) and Celery 5.2 (Debian's, Redis
# transport), each used the way its authors advise (bench/fleet/peers/*: each
# file's header says how and why), on one redis-server of this script's own
# (a free loopback port, --save '' --appendonly no: nothing on disk for anyone).
# Three shapes, the same for every system:
#   drain     enqueue JOBS empty jobs in bulk (Sidekiq push_bulk, BullMQ
#             addBulk, 1,000 a call; Celery has none: apply_async in a loop;
#             hourglass enqueue_bulk, --bulk 100, 2 producers), then start one
#             worker process with concurrency 10 and time until all ran;
#             Redis commands a job over both (INFO commandstats).
#   overload  one worker with concurrency 4 and jobs that sleep 10 ms
#             (capacity 400 jobs/s), offered 800 jobs/s (2x) on a fixed
#             schedule for OVERLOAD_SECONDS; a job is in time if it started
#             within 500 ms of its send; goodput = in time / offering seconds.
#             Sidekiq and BullMQ have no freshness bound and run plain; Celery
#             runs plain and, as "celery (expires)", with expires=0.5.
#   latency   enqueue-to-start latency: one worker with concurrency 10, empty
#             jobs offered one enqueue call each on a fixed schedule at half
#             the system's drain rate of the same round (rounded down, at
#             least 10/s) for LATENCY_SECONDS, each carrying its send time
#             (CLOCK_MONOTONIC); a job's first act notes its start less that;
#             p50 and p99 of those. Half capacity, because at capacity the
#             wait is the backlog, which grows for as long as the offering
#             lasts, whereas at half it is what the system adds on its own
#             (fetch, dispatch, start) plus ordinary queueing, and systems of
#             different capacity are compared at the same load.
# hourglass: build/release/tools/hourglass-bench fleet on the same Redis
# (throughput: --consumers 1 --slots 10 --jobs JOBS; overload: --slots 4 --rate
# 800 --freshness 500ms --service-time 10ms; no --fsync-always, as the peers'
# Redis does not write either). Its row's enqueue is bulk_jobs_per_s, its drain
# drain_jobs_per_s, plus hourglass_jobs_per_s (producers and consumer at once);
# its commands a job come from that end-to-end run (one job per enqueue call),
# which is how hourglass-bench counts them. Its latency is the one that run
# reports (latency_p50_ms, latency_p99_ms): its own measurement, jobs offered
# one async_enqueue each on a schedule at half its end-to-end rate
# (hourglass_jobs_per_s: producers and consumer at once; the peers get half
# their drain rate) for about 2 s of jobs, at most JOBS (not LATENCY_SECONDS).
# Rates differ, so its latency is measured again at each of Sidekiq's and
# BullMQ's latency rates of the round ("hourglass at sidekiq's rate", ...):
# the same offered load, the same shape, side by side.
# Its "naive" Streams consumer (XREADGROUP, run, XACK) is shown for the
# overload too.
# RUNS rounds of everything; prints one markdown table, each cell the median
# (min-max) over the rounds.
# Usage: bench/fleet/vs_peers.sh [RUNS=3] [JOBS=20000]
#   env: OVERLOAD_SECONDS (10), LATENCY_SECONDS (5), HOURGLASS_BENCH, REDIS_PORT (default:
#   a free one in 16400-16499), CELERY_POOL (eventlet, as Celery's docs advise for I/O; see
#   celery_bench.py)
# Installs on demand (not in CI): ruby-sidekiq ruby-hiredis python3-celery
# python3-redis python3-eventlet (or -gevent) (Debian) and bullmq@6 with its peer
# dependency ioredis@5 (npm, into build/peers/).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
jobs=${2:-20000}
overload_seconds=${OVERLOAD_SECONDS:-10}
latency_seconds=${LATENCY_SECONDS:-5}
rate=800      # 2x the capacity: 4 slots / 10 ms
bench=${HOURGLASS_BENCH:-build/release/tools/hourglass-bench}
peers=bench/fleet/peers
[ -x "$bench" ] || {
  echo "no $bench: cmake --preset release && cmake --build --preset release --target hourglass-bench" >&2
  exit 2
}
celery_pkgs=(python3-celery python3-redis)
case ${CELERY_POOL:-eventlet} in eventlet | gevent) celery_pkgs+=("python3-${CELERY_POOL:-eventlet}") ;; esac
tools/install-deps ruby-sidekiq ruby-hiredis "${celery_pkgs[@]}"
python_celery=/usr/bin/python3  # Debian's, where python3-celery is (a pyenv python3 may come first on PATH)
# shellcheck source=bench/fleet/bullmq_install.sh
source bench/fleet/bullmq_install.sh
export PYTHONDONTWRITEBYTECODE=1

# shellcheck source=bench/fleet/own_redis.sh
source bench/fleet/own_redis.sh
start_own_redis 16400 16500
results=$dir/results.jsonl

fresh() { redis-cli -p "$port" flushall >/dev/null; }
run() {  # DESCRIPTION COMMAND...: its last stdout line (one JSON object) into results
  local what=$1 out
  shift
  fresh
  echo "  $what" >&2
  out=$("$@" | tail -n 1)
  python3 -c 'import json, sys; json.loads(sys.argv[1])' "$out" 2>/dev/null || {
    echo "$what: no JSON: $out" >&2
    exit 1
  }
  echo "$out" >>"$results"
}
hourglass() {  # SHAPE FLAGS...: hourglass-bench fleet's JSON, in the harnesses' shape
  local shape=$1
  shift
  fresh
  echo "  hourglass $shape" >&2
  "$bench" fleet --broker "$url" --producers 2 --window 256 --bulk 100 --overload-consumers 1 \
    --freshness 500ms --service-time 10ms --json "$@" | tail -n 1 | python3 -c '
import json, sys
shape, r = sys.argv[1], json.loads(sys.stdin.read())
if shape == "drain":
    t = r["throughput"][0]
    print(json.dumps({"system": "hourglass", "shape": "drain", "enqueue_jobs_per_s": t["bulk_jobs_per_s"],
                      "drain_jobs_per_s": t["drain_jobs_per_s"], "end_to_end_jobs_per_s": t["hourglass_jobs_per_s"],
                      "redis_calls_per_job": t["redis_calls_per_job"]}))
    print(json.dumps({"system": "hourglass", "shape": "latency", "rate": t["hourglass_jobs_per_s"] / 2,
                      "latency_p50_ms": t["latency_p50_ms"], "latency_p99_ms": t["latency_p99_ms"]}))
else:
    for g in r["goodput"]:
        print(json.dumps(dict(g, system="hourglass" if g["consumer"] == "hourglass" else "naive Streams consumer",
                              shape="overload", capacity_per_s=r["capacity_per_s"])))' "$shape" >>"$results"
}

hourglass_latency_at() {  # PEER RATE: hourglass's start latency offered the peer's rate
  local peer=$1 offered=$2
  fresh
  echo "  hourglass latency at $peer's rate" >&2
  "$bench" fleet --broker "$url" --producers 2 --window 256 --bulk 100 --consumers 1 --slots 10 --jobs "$jobs" \
    --latency-rate "$offered" --rate 1 --duration 1ms --json | tail -n 1 | python3 -c '
import json, sys
peer, offered, t = sys.argv[1], float(sys.argv[2]), json.loads(sys.stdin.read())["throughput"][0]
print(json.dumps({"system": f"hourglass at {peer}\x27s rate", "shape": "latency", "rate": offered,
                  "latency_p50_ms": t["latency_p50_ms"], "latency_p99_ms": t["latency_p99_ms"]}))' "$peer" "$offered" \
    >>"$results"
}

half_drain() {  # SYSTEM: half its drain jobs/s of this round (its last drain row), rounded down, at least 10
  python3 -c '
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
drain = [r["drain_jobs_per_s"] for r in rows if r["system"] == sys.argv[2] and r["shape"] == "drain"][-1]
print(max(10, int(drain // 2)))' "$results" "$1"
}

for r in $(seq "$runs"); do
  echo "round $r of $runs" >&2
  run "sidekiq drain" ruby "$peers/sidekiq_bench.rb" drain "$url" "$jobs" 10
  run "bullmq drain" node "$peers/bullmq_bench.mjs" drain "$url" "$jobs" 10
  run "celery drain" "$python_celery" "$peers/celery_bench.py" drain "$url" "$jobs" 10
  # The overload part of this run offers nothing (--rate 1 for 1 ms): it is the next one's.
  hourglass drain --consumers 1 --slots 10 --jobs "$jobs" --rate 1 --duration 1ms
  # hourglass's latency came with its drain run (at half its end-to-end rate).
  run "sidekiq latency" ruby "$peers/sidekiq_bench.rb" latency "$url" "$(half_drain sidekiq)" "$latency_seconds" 10
  run "bullmq latency" node "$peers/bullmq_bench.mjs" latency "$url" "$(half_drain bullmq)" "$latency_seconds" 10
  run "celery latency" "$python_celery" "$peers/celery_bench.py" latency "$url" "$(half_drain celery)" \
    "$latency_seconds" 10
  hourglass_latency_at sidekiq "$(half_drain sidekiq)"
  hourglass_latency_at bullmq "$(half_drain bullmq)"
  run "sidekiq overload" ruby "$peers/sidekiq_bench.rb" overload "$url" "$rate" "$overload_seconds" 4
  run "bullmq overload" node "$peers/bullmq_bench.mjs" overload "$url" "$rate" "$overload_seconds" 4
  run "celery overload" "$python_celery" "$peers/celery_bench.py" overload "$url" "$rate" "$overload_seconds" 4
  run "celery (expires) overload" "$python_celery" "$peers/celery_bench.py" overload "$url" "$rate" \
    "$overload_seconds" 4 expires
  # The throughput part of this run is small and unused.
  hourglass overload --consumers 1 --slots 4 --jobs 1000 --rate "$rate" --duration "${overload_seconds}s"
done

python3 - "$results" "$runs" "$jobs" "$overload_seconds" "$latency_seconds" <<'EOF'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
runs, jobs, secs, latency_secs = sys.argv[2:]
order = ["hourglass", "hourglass at sidekiq's rate", "hourglass at bullmq's rate", "sidekiq", "bullmq", "celery",
         "celery (expires)", "naive Streams consumer"]

def cell(system, shape, key, fmt="{:.0f}"):
    v = [r[key] for r in rows if r["system"] == system and r["shape"] == shape and key in r]
    if not v:
        return "—"
    m = fmt.format(statistics.median(v))
    return m if len(v) == 1 else f"{m} ({fmt.format(min(v))}–{fmt.format(max(v))})"

def goodput(system):
    v = [r for r in rows if r["system"] == system and r["shape"] == "overload"]
    if not v:
        return "—"
    ratio = statistics.median(r["goodput_per_s"] / r["capacity_per_s"] for r in v)
    return f"{cell(system, 'overload', 'goodput_per_s')} ({ratio:.2f}x capacity)"

print(f"{runs} rounds, {jobs} jobs a drain, {secs} s of overload at 2x (800 jobs/s offered, capacity 400), "
      f"start latency at half each system's capacity ({latency_secs} s for the peers): median (min–max)\n")
print("| system | enqueue jobs/s (bulk) | drain jobs/s (1 worker, concurrency 10) | end to end jobs/s "
      "| Redis commands/job | goodput/s at 2x | ran too late at 2x | start latency p50 ms | p99 ms |")
print("|---|---|---|---|---|---|---|---|---|")
for s in order:
    if any(r["system"] == s for r in rows):
        print(f"| {s} | {cell(s, 'drain', 'enqueue_jobs_per_s')} | {cell(s, 'drain', 'drain_jobs_per_s')} "
              f"| {cell(s, 'drain', 'end_to_end_jobs_per_s')} | {cell(s, 'drain', 'redis_calls_per_job', '{:.1f}')} "
              f"| {goodput(s)} | {cell(s, 'overload', 'ran_too_late')} "
              f"| {cell(s, 'latency', 'latency_p50_ms', '{:.2f}')} | {cell(s, 'latency', 'latency_p99_ms', '{:.2f}')} |")
print("\nhourglass's commands/job are from its end-to-end run (one job per enqueue call); the peers' from "
      "bulk enqueue + drain, their worker's start-up included.")
def offered(system):  # the schedule's rate, and what the producer sent when it fell behind
    sent = cell(system, 'latency', 'offered_per_s')
    return f"{system} {cell(system, 'latency', 'rate')}" + ("" if sent == "—" else f" (sent {sent})")

offers = ", ".join(offered(s) for s in order if any(r["system"] == s and r["shape"] == "latency" for r in rows))
print(f"\nStart latency offered jobs/s: {offers}: half the peers' drain rate, half hourglass's end-to-end rate "
      "(its own measurement, about 2 s of jobs, at most JOBS), and hourglass again at Sidekiq's and BullMQ's; "
      "one enqueue call a job.")
EOF
