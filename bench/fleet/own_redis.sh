# shellcheck shell=bash disable=SC2034  # sets dir, port and url for the sourcing script
# Sourced by the fleet bench scripts: a redis-server of the script's own on a
# free loopback port in [LO, HI) (never 6399: another bench lives there),
# nothing on disk, shut down on exit; or, with REDIS_PORT set, that port
# (a server already answering there is used and left running).
# Sets: dir (a temporary folder, removed on exit), port, url.
#   source bench/fleet/own_redis.sh; start_own_redis 16400 16500
start_own_redis() {
  dir=$(mktemp -d)
  port=${REDIS_PORT:-$(python3 -c '
import socket, sys
for p in range(int(sys.argv[1]), int(sys.argv[2])):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    s.close()
    print(p)
    break' "$1" "$2")}
  [ -n "$port" ] || { echo "no free port in $1-$(($2 - 1))" >&2; exit 2; }
  local ours=1
  if redis-cli -p "$port" ping >/dev/null 2>&1; then
    ours=0  # REDIS_PORT names a running server: not ours to shut down
  else
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
      --logfile "$dir/redis.log" --daemonize no &
  fi
  # shellcheck disable=SC2064  # expanded now, on purpose
  trap "$([ "$ours" = 1 ] && echo "redis-cli -p $port shutdown nosave >/dev/null 2>&1 || true;") kill \$(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf '$dir'" EXIT
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping >/dev/null || { cat "$dir/redis.log" >&2; exit 1; }
  url=redis://127.0.0.1:$port
}
