#!/usr/bin/env bash
# HTTP echo: hourglassd against nginx on the same pinned core (the goal: at
# least 0.7x nginx's requests per second).
# Each server runs on CPU $SERVER_CPU (default 1) with one worker (hourglassd:
# --workers 1 --io-threads 1; nginx: worker_processes 1), wrk -t1 runs on
# $CLIENT_CPU (default 0); keep-alive POSTs of 5 bytes to hourglassd's `echo`
# (admitted and counted as any job; run on the I/O thread when a worker idles,
# handler_options::run_inline) and to nginx's `return 200`.
# RUNS rounds, each measuring nginx then hourglassd for SECONDS; prints each
# round's req/s and the median, min and max of the ratio hourglassd / nginx.
# Usage: bench/http/echo_vs_nginx.sh [RUNS=5] [SECONDS=10] [CONNECTIONS=64]
# Stop other load first (e.g. `pgrep -f fuzz/ | xargs kill -STOP`).
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
secs=${2:-10}
conns=${3:-64}
server_cpu=${SERVER_CPU:-1}
client_cpu=${CLIENT_CPU:-0}
hourglassd=${HOURGLASSD:-build/release/tools/hourglassd}
[ -x "$hourglassd" ] || {
  echo "no $hourglassd: cmake --preset release && cmake --build --preset release --target hourglassd" >&2
  exit 2
}
tools/install-deps nginx-light
nginx=$(command -v nginx || echo /usr/sbin/nginx)

dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
port_nginx=${NGINX_PORT:-18181}
port_hourglass=${HOURGLASS_PORT:-18182}
cat >"$dir/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$port_nginx;
    location / { return 200 "hello"; }
  }
}
EOF
cat >"$dir/post.lua" <<'EOF'
wrk.method = "POST"
wrk.body = "hello"
wrk.headers["Content-Type"] = "text/plain"
EOF

taskset -c "$server_cpu" "$nginx" -c "$dir/nginx.conf" &
taskset -c "$server_cpu" "$hourglassd" --listen "127.0.0.1:$port_hourglass" --workers 1 --io-threads 1 \
  --queue-capacity 4096 --log-level warn &
for port in "$port_nginx" "$port_hourglass"; do
  for _ in $(seq 100); do curl -sf -o /dev/null -d x "http://127.0.0.1:$port/v1/jobs/echo" && break; sleep 0.1; done
done

rps() {  # URL SECONDS -> requests per second
  taskset -c "$client_cpu" wrk -t1 -c"$conns" -d"$2"s -s "$dir/post.lua" "$1" | awk '/^Requests\/sec:/ {print $2}'
}
url_nginx="http://127.0.0.1:$port_nginx/v1/jobs/echo"
url_hourglass="http://127.0.0.1:$port_hourglass/v1/jobs/echo"
rps "$url_nginx" 2 >/dev/null  # warm-up
rps "$url_hourglass" 2 >/dev/null

ratios=()
printf '%-5s %14s %14s %8s\n' round nginx_rps hourglassd_rps ratio
for r in $(seq "$runs"); do
  n=$(rps "$url_nginx" "$secs")
  h=$(rps "$url_hourglass" "$secs")
  ratio=$(python3 -c "print(f'{$h / $n:.3f}')")
  ratios+=("$ratio")
  printf '%-5s %14s %14s %8s\n' "$r" "$n" "$h" "$ratio"
done
python3 - "${ratios[@]}" <<'EOF'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
print(f"ratio hourglassd/nginx: median {statistics.median(r):.3f}  min {min(r):.3f}  max {max(r):.3f}  ({len(r)} rounds)")
EOF
