#!/usr/bin/env bash
# Fleet enqueue over HTTP against the embedding API's, on one redis-server of
# this script's own (a free loopback port, nothing on disk). The goal: async
# POSTs at least 0.7x the embedding API's enqueue rate on the same machine.
#   embedding  hourglass-bench fleet --consumers 1 --jobs JOBS: its
#              enqueue_jobs_per_s (2 producer threads, 256 calls in flight
#              each, one job a call) and bulk_jobs_per_s (100 a call).
#   http       hourglassd --broker --produce-only (takes jobs, runs none, as
#              the embedding bench's enqueue phase has no consumer) with
#              --policy fifo (the embedding jobs carry no freshness bound, so
#              neither side reads the fleet's counts), under wrk -t1 -cCONNS
#              for SECONDS: POST /v1/jobs/echo with Prefer: respond-async and
#              a 1-byte body (jobs/s = 202s/s; any other status fails the run),
#              then POST /v1/jobs:bulk with 100 jobs a request (jobs/s = 100 x
#              requests/s).
# The daemon, wrk and Redis share the machine's cores, as the bench process
# and Redis do on the embedding side. Redis is flushed between measurements.
# RUNS rounds; prints each round and the median (min-max) of every figure and
# of the ratios http / embedding.
# Usage: bench/fleet/http_enqueue.sh [RUNS=3] [SECONDS=10] [CONNS=64] [JOBS=50000]
#   env: HOURGLASSD, HOURGLASS_BENCH, REDIS_PORT, HOURGLASS_PORT (18190)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
secs=${2:-10}
conns=${3:-64}
jobs=${4:-50000}
hourglassd=${HOURGLASSD:-build/release/tools/hourglassd}
bench=${HOURGLASS_BENCH:-build/release/tools/hourglass-bench}
for b in "$hourglassd" "$bench"; do
  [ -x "$b" ] || {
    echo "no $b: cmake --preset release && cmake --build --preset release --target hourglassd hourglass-bench" >&2
    exit 2
  }
done
command -v wrk >/dev/null || tools/install-deps wrk

# shellcheck source=bench/fleet/own_redis.sh
source bench/fleet/own_redis.sh
start_own_redis 16500 16600
http_port=${HOURGLASS_PORT:-18190}

# wrk scripts: one async job a request; 100 jobs a bulk request. Every
# response that is not the expected status is counted and printed.
cat >"$dir/common.lua" <<'EOF'
local bad = 0
function response(status, headers, body)
  if status ~= expected then bad = bad + 1 end
end
function done(summary, latency, requests)
  io.write(string.format("bad_responses %d\n", bad))
end
EOF
{
  echo 'expected = 202'
  echo 'wrk.method = "POST"; wrk.body = "x"'
  echo 'wrk.headers["Prefer"] = "respond-async"; wrk.headers["Content-Type"] = "text/plain"'
  cat "$dir/common.lua"
} >"$dir/one.lua"
{
  echo 'expected = 200'
  python3 -c '
import json
body = json.dumps({"jobs": [{"handler": "echo", "payload": "x"}] * 100})
print("wrk.method = \"POST\"; wrk.body = " + json.dumps(body))'
  echo 'wrk.headers["Content-Type"] = "application/json"'
  cat "$dir/common.lua"
} >"$dir/bulk.lua"

"$hourglassd" --listen "127.0.0.1:$http_port" --broker "$url" --produce-only --policy fifo \
  --log-level warn >"$dir/daemon.log" 2>&1 &
for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$http_port/readyz" && break; sleep 0.1; done
curl -sf -o /dev/null "http://127.0.0.1:$http_port/readyz" || { cat "$dir/daemon.log" >&2; exit 1; }

fresh() { redis-cli -p "$port" flushall >/dev/null; }
wrk_rate() {  # SCRIPT PATH SECONDS -> requests/s; fails on any unexpected status
  local out
  out=$(wrk -t1 -c"$conns" -d"$3"s -s "$dir/$1" "http://127.0.0.1:$http_port$2")
  if ! grep -q '^bad_responses 0$' <<<"$out"; then
    echo "unexpected responses from $2:" >&2
    echo "$out" >&2
    tail -5 "$dir/daemon.log" >&2
    exit 1
  fi
  awk '/^Requests\/sec:/ {print $2}' <<<"$out"
}
fresh
wrk_rate one.lua /v1/jobs/echo 2 >/dev/null  # warm-up
fresh

rows=()
printf '%-5s %12s %12s %12s %12s\n' round embed_enq embed_bulk http_enq http_bulk
for r in $(seq "$runs"); do
  fresh
  embed=$("$bench" fleet --broker "$url" --consumers 1 --slots 10 --jobs "$jobs" --loads 2 --duration 1s --json |
    tail -1)
  e1=$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["throughput"][0]["enqueue_jobs_per_s"]))' "$embed")
  eb=$(python3 -c 'import json,sys; print(round(json.loads(sys.argv[1])["throughput"][0]["bulk_jobs_per_s"]))' "$embed")
  fresh
  h1=$(wrk_rate one.lua /v1/jobs/echo "$secs")
  fresh
  hb=$(python3 -c "print(round(100 * $(wrk_rate bulk.lua /v1/jobs:bulk "$secs")))")
  fresh
  printf '%-5s %12s %12s %12s %12s\n' "$r" "$e1" "$eb" "$h1" "$hb"
  rows+=("$e1,$eb,$h1,$hb")
done
python3 - "${rows[@]}" <<'EOF'
import statistics, sys
rows = [[float(x) for x in r.split(",")] for r in sys.argv[1:]]
def cell(xs, fmt="{:.0f}"):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"
cols = list(zip(*rows))
print()
print("| embedding enqueue | embedding bulk | HTTP respond-async | HTTP bulk (100/request) | HTTP / embedding | HTTP bulk / embedding bulk |")
print("| --- | --- | --- | --- | --- | --- |")
ratio1 = [h / e for e, h in zip(cols[0], cols[2])]
ratiob = [h / e for e, h in zip(cols[1], cols[3])]
print(f"| {cell(cols[0])} | {cell(cols[1])} | {cell(cols[2])} | {cell(cols[3])} | "
      f"{cell(ratio1, '{:.2f}')} | {cell(ratiob, '{:.2f}')} |")
EOF
