#!/usr/bin/env python3
"""An upstream that always fails, and notes every attempt that reached it.

For bench/fleet/retry_vs_bullmq.sh: hourglassd's `call` handler forwards each
attempt of a job to this server's POST /v1/jobs/<handler>. Every POST is
answered 503 (a retryable failure for hourglass: the call ends 500
downstream_error) and appends one line to LOG:

    <arrival, time.time()> <deadline>

where deadline is the "deadline" (epoch seconds) of the JSON request body,
the job's overall deadline as its submitter computed it. The server binds
127.0.0.1:PORT (0: a free one) and prints the port it got, one line, before
serving.

    python3 attempt_recorder.py PORT LOG

Standard library only: http.server's ThreadingHTTPServer, HTTP/1.1 keep-alive.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b'{"error": "unavailable", "message": "attempt_recorder always fails"}'


class Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log_lock = threading.Lock()
    log = None

    def do_POST(self):  # noqa: N802 (http.server's name)
        arrival = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            deadline = float(json.loads(raw)["deadline"])
        except (ValueError, KeyError, TypeError):
            deadline = float("nan")
        with Recorder.log_lock:
            Recorder.log.write(f"{arrival:.6f} {deadline:.6f}\n")
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):  # quiet: one line per request would be noise
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: attempt_recorder.py PORT LOG")
    Recorder.log = open(sys.argv[2], "a", buffering=1, encoding="ascii")  # noqa: SIM115 (open for the server's life)
    server = Server(("127.0.0.1", int(sys.argv[1])), Recorder)
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        Recorder.log.close()


if __name__ == "__main__":
    main()
