#!/usr/bin/env bash
# What an open dashboard costs the daemon (and its Redis): N pages, each
# polling what the page polls every 2 s (GET /v1/queues, GET /metrics, and on
# a queue's page GET /v1/jobs?limit=50&state=dead), against none, for a
# fixed time; the CPU time the processes used, from /proc/PID/stat.
# Usage: bench/ui/page_cost.sh [BUILD_DIR] [SECONDS] [PAGES ...]
#   (default: build/release 20 0 10 50). Two queues' states: empty, and
#   1,000 jobs scheduled (the queue view reads each one's attempt: its worst case).
set -euo pipefail
build=${1:-build/release}
secs=${2:-20}
shift $(( $# > 2 ? 2 : $# )) || true
pages=("$@")
[ ${#pages[@]} -gt 0 ] || pages=(0 10 50)
dir=$(mktemp -d)
redis_port=$((20000 + RANDOM % 10000))
http_port=$((30000 + RANDOM % 10000))
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
redis-server --port $redis_port --save '' --appendonly no --dir "$dir" --daemonize no >/dev/null &
redis=$!
until redis-cli -p $redis_port ping >/dev/null 2>&1; do sleep 0.1; done
"$build/tools/hourglassd" --listen 127.0.0.1:$http_port --broker redis://127.0.0.1:$redis_port --workers 4 \
  --log-level warn --metrics-cache 1s &
daemon=$!
until curl -sf http://127.0.0.1:$http_port/readyz >/dev/null; do sleep 0.1; done
base=http://127.0.0.1:$http_port
ticks=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$ticks" '{print ($14 + $15) * 1000 / t}' /proc/$1/stat; }
calc() { awk "BEGIN { printf \"%.3f\", $1 }"; }

page() {  # one open page: its three requests every 2 s until killed
  while true; do
    curl -s -o /dev/null "$base/v1/queues" -o /dev/null "$base/metrics" -o /dev/null "$base/v1/jobs?limit=50&state=dead"
    sleep 2
  done
}

measure() {  # pages -> "daemon_ms redis_ms"
  local n=$1 pids=()
  for ((i = 0; i < n; i++)); do page & pids+=($!); done
  sleep 2  # every page has polled once
  local d0 r0 d1 r1
  d0=$(cpu_ms $daemon); r0=$(cpu_ms $redis)
  sleep "$secs"
  d1=$(cpu_ms $daemon); r1=$(cpu_ms $redis)
  [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null
  wait "${pids[@]}" 2>/dev/null || true
  echo "$(calc "$d1 - $d0") $(calc "$r1 - $r0")"
}

report() {  # state label
  local base_d="" base_r=""
  for n in "${pages[@]}"; do
    read -r d r < <(measure "$n")
    if [ -z "$base_d" ]; then base_d=$d; base_r=$r; fi
    local per_d per_r
    if [ "$n" -gt 0 ]; then
      per_d=$(calc "($d - $base_d) / $n / $secs")
      per_r=$(calc "($r - $base_r) / $n / $secs")
    else
      per_d="-"; per_r="-"
    fi
    printf '%-22s pages %3d  daemon %7.1f ms CPU (%5.2f %% of a core)  redis %7.1f ms  per page: daemon %s ms/s, redis %s ms/s\n' \
      "$1" "$n" "$d" "$(calc "$d / $secs / 10")" "$r" "$per_d" "$per_r"
  done
}

report "empty queue"
# 1,000 scheduled jobs an hour ahead, 10 of them retries, the rest delayed
for i in $(seq 1 1000); do
  printf 'ZADD hg:{default}:delayed %d job%04d\nHSET hg:{default}:job:job%04d attempt %d state scheduled\n' \
    $(( $(date +%s%3N) + 3600000 )) "$i" "$i" $(( i % 100 == 0 ? 2 : 1 ))
done | redis-cli -p $redis_port >/dev/null
report "1000 scheduled"
