#!/usr/bin/env python3
"""Memory per idle keep-alive connection of hourglassd, from its RSS.

Starts the daemon on a loopback port, then opens connections in two steps
(--low, then up to --high), each sending one GET /healthz and reading the
answer so its session is fully set up, and holds them idle. RSS (VmRSS of
/proc/PID/status) is read after each step; the slope between the two
steps is the bytes one more idle connection costs (the first step absorbs
what any first connections cost: thread stacks, allocator arenas). Kernel
socket buffers are not in RSS and not counted.

usage: idle_connections.py HOURGLASSD [--low N] [--high N] [--json]
"""
import argparse
import json
import re
import resource
import signal
import socket
import subprocess
import sys
import time


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def open_idle(port, n, into):
    request = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("the daemon closed a connection")
            answer += chunk
        if not answer.startswith(b"HTTP/1.1 200"):
            raise RuntimeError("unexpected answer: %r" % answer[:40])
        into.append(s)


def settle(pid):
    time.sleep(1.0)
    return rss_bytes(pid)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hourglassd")
    ap.add_argument("--low", type=int, default=500)
    ap.add_argument("--high", type=int, default=2500)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = a.high + 200
    if hard < need:
        sys.exit("idle_connections: needs %d descriptors, the hard limit is %d" % (need, hard))
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))  # the daemon inherits it
    proc = subprocess.Popen([a.hourglassd, "--listen", "127.0.0.1:0", "--workers", "1", "--io-threads", "1",
                             "--max-connections", str(a.high + 100), "--idle-timeout", "10m",
                             "--log-level", "info"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    conns = []
    try:
        port = None
        while port is None:
            line = proc.stdout.readline()
            if not line:
                sys.exit("idle_connections: hourglassd exited before listening")
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            port = int(m.group(1)) if m else None
        open_idle(port, a.low, conns)
        low = settle(proc.pid)
        open_idle(port, a.high - a.low, conns)
        high = settle(proc.pid)
        per = (high - low) / (a.high - a.low)
        print("hourglassd RSS: %.1f MiB with %d idle connections, %.1f MiB with %d: %.0f bytes per idle connection"
              % (low / 2**20, a.low, high / 2**20, a.high, per))
        if a.json:
            print(json.dumps({"low": a.low, "high": a.high, "rss_low_bytes": low, "rss_high_bytes": high,
                              "bytes_per_idle_connection": round(per)}))
    finally:
        for s in conns:
            s.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(main())
