#!/usr/bin/env bash
# The fleet on a Redis Cluster of this script's own: MASTERS redis-server
# processes in cluster mode on free loopback ports (no replicas, nothing on
# disk), joined with redis-cli --cluster create, shut down on exit. Runs
# `hourglass-bench cluster --queues 1,..,MASTERS` RUNS times and prints each
# run's table, then the median (min-max) jobs/s per queue count and the
# median commands/s, CPU and CPU per job of the busiest master.
# Usage: bench/fleet/cluster.sh [RUNS=3] [JOBS=20000] [MASTERS=3]
#   env: HOURGLASS_BENCH, and extra hourglass-bench cluster flags in CLUSTER_FLAGS
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-3}
jobs=${2:-20000}
masters=${3:-3}
bench=${HOURGLASS_BENCH:-build/release/tools/hourglass-bench}
[ -x "$bench" ] || {
  echo "no $bench: cmake --preset release && cmake --build --preset release --target hourglass-bench" >&2
  exit 2
}
command -v redis-cli >/dev/null || tools/install-deps

dir=$(mktemp -d)
ports=()
cleanup() {
  for p in "${ports[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
for p in $(python3 -c '
import socket, sys
found = []
for p in range(17000, 17200):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); s2 = socket.socket(); s2.bind(("127.0.0.1", p + 10000)); s2.close()
    except OSError:
        continue
    finally:
        s.close()
    found.append(p)
    if len(found) == int(sys.argv[1]): break
print(*found)' "$masters"); do
  mkdir -p "$dir/$p"
  redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes --cluster-config-file nodes.conf \
    --save '' --appendonly no --dir "$dir/$p" --logfile "$dir/$p/redis.log" --daemonize no &
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
done
nodes=()
for p in "${ports[@]}"; do nodes+=("127.0.0.1:$p"); done
redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log"
for _ in $(seq 100); do
  redis-cli -p "${ports[0]}" cluster info | grep -q cluster_state:ok && break
  sleep 0.1
done
url="redis+cluster://$(IFS=,; echo "${nodes[*]}")"
counts=$(seq -s, 1 "$masters")
what=queues
[ "${SHARDS:-0}" = 1 ] && what=shards
echo "cluster of $masters masters: $url; $runs runs of $jobs jobs per queue (or shard), counting $what"
for i in $(seq "$runs"); do
  # shellcheck disable=SC2086  # CLUSTER_FLAGS is a list of flags
  "$bench" cluster --broker "$url" --"$what" "$counts" --jobs "$jobs" ${CLUSTER_FLAGS:-} --json | tee "$dir/run$i.out"
  tail -n1 "$dir/run$i.out" >>"$dir/runs.jsonl"
done
python3 - "$dir/runs.jsonl" "$what" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in runs:
    for run in r["runs"]:
        busiest = max(run["nodes"], key=lambda n: n["cpu_cores"])
        by.setdefault(run[sys.argv[2]], []).append((run["jobs_per_s"], busiest))
print(f"\n| {sys.argv[2]} | jobs/s, median (min-max) | busiest master: commands/s, CPU cores, CPU us/job (medians) |")
print("|---|---|---|")
for k, v in sorted(by.items()):
    j = [x[0] for x in v]
    med = lambda xs: statistics.median(xs)
    print(f"| {k} | {med(j):,.0f} ({min(j):,.0f}-{max(j):,.0f}) | "
          f"{med([x[1]['commands_per_s'] for x in v]):,.0f}, {med([x[1]['cpu_cores'] for x in v]):.2f}, "
          f"{med([x[1]['cpu_us_per_job'] for x in v]):.1f} |")
PY
