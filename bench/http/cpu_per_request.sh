#!/usr/bin/env bash
# CPU a server spends per request, split into user and kernel time: the
# process's utime/stime (/proc/PID/stat) across one wrk run, divided by the
# requests wrk completed. Less sensitive to a noisy neighbour than req/s.
# Usage: bench/http/cpu_per_request.sh PID URL [SECONDS=6] [CONNECTIONS=64]
# (keep-alive POSTs of 5 bytes, wrk -t1 pinned to $CLIENT_CPU, default 0)
set -euo pipefail
pid=$1
url=$2
secs=${3:-6}
conns=${4:-64}
lua=$(mktemp)
trap 'rm -f "$lua"' EXIT
printf 'wrk.method = "POST"\nwrk.body = "hello"\nwrk.headers["Content-Type"] = "text/plain"\n' >"$lua"
read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
out=$(taskset -c "${CLIENT_CPU:-0}" wrk -t1 -c"$conns" -d"$secs"s -s "$lua" "$url")
read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
n=$(echo "$out" | awk '/requests in/ {print $1}')
awk -v u=$((u1 - u0)) -v s=$((s1 - s0)) -v n="$n" -v t="$(getconf CLK_TCK)" \
  'BEGIN {printf "requests %d  user %.2f us/request  kernel %.2f us/request\n", n, u / t * 1e6 / n, s / t * 1e6 / n}'
