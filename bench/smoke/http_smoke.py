#!/usr/bin/env python3
"""Starts hourglassd on an ephemeral loopback port, drives it with
`hourglass-bench http` for a second, checks the JSON report, then drains the
daemon with SIGTERM and checks it exits 0.

usage: http_smoke.py HOURGLASSD HOURGLASS_BENCH CHECK_JSON
"""
import json
import re
import signal
import subprocess
import sys
import time


def main():
    daemon, bench, check = sys.argv[1:4]
    proc = subprocess.Popen([daemon, "--listen", "127.0.0.1:0", "--workers", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        port = None
        deadline = time.monotonic() + 20
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
        if port is None:
            print("http_smoke: hourglassd did not say where it listens", file=sys.stderr)
            return 1
        url = "http://127.0.0.1:%d/v1/jobs/echo" % port
        run = subprocess.run([sys.executable, check, "http", "--", bench, "http", url, "--rate", "200",
                              "--duration", "1s", "--budget", "500ms", "--body", "hello", "--connections", "4",
                              "--json"], stdout=subprocess.PIPE, text=True, timeout=30)
        sys.stdout.write(run.stdout)
        if run.returncode != 0:
            return 1
        # check_json.py echoes the command's output, then adds its own verdict line.
        doc = json.loads([l for l in run.stdout.split("\n") if l.startswith("{")][-1])
        if doc["offered"] < 150 or doc["ok"] < 0.9 * doc["offered"] or doc["errors"] != 0:
            print("http_smoke: unexpected counts: %r" % doc, file=sys.stderr)
            return 1
        if not doc["latency_ms"]["p50"] > 0:
            print("http_smoke: no latency recorded", file=sys.stderr)
            return 1
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = -1
    if code != 0:
        print("http_smoke: hourglassd exited %d after SIGTERM" % code, file=sys.stderr)
        return 1
    print("http_smoke: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
