#!/usr/bin/env python3
"""Starts a redis-server on a free loopback port in a temporary directory,
runs a short `hourglass-bench fleet` against it, checks the JSON report, and
stops the server.

usage: fleet_smoke.py REDIS_SERVER HOURGLASS_BENCH CHECK_JSON
"""
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    redis, bench, check = sys.argv[1:4]
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen([redis, "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
                                   "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        print("fleet_smoke: redis-server did not start", file=sys.stderr)
                        return 1
                    time.sleep(0.05)
            return subprocess.run([sys.executable, check, "fleet", "--", bench, "fleet", "--broker",
                                   "redis://127.0.0.1:%d" % port, "--consumers", "1,2", "--jobs", "200",
                                   "--duration", "300ms", "--loads", "2", "--json"]).returncode
        finally:
            server.kill()
            server.wait()


if __name__ == "__main__":
    sys.exit(main())
