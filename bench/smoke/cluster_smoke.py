#!/usr/bin/env python3
"""Starts a Redis Cluster of three masters (the fewest redis-cli creates;
redis-server in cluster mode on free loopback ports, joined by redis-cli
--cluster create) in a temporary directory, runs a short `hourglass-bench cluster` against it, checks the JSON
report, and stops the servers.

usage: cluster_smoke.py REDIS_SERVER HOURGLASS_BENCH CHECK_JSON
"""
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    # The cluster bus listens on port + 10000: both must be free.
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as b:
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def main():
    redis, bench, check = sys.argv[1:4]
    cli = os.path.join(os.path.dirname(redis), "redis-cli")
    with tempfile.TemporaryDirectory() as d:
        ports = [free_port(), free_port(), free_port()]
        servers = []
        try:
            for p in ports:
                os.makedirs(os.path.join(d, str(p)))
                servers.append(subprocess.Popen(
                    [redis, "--port", str(p), "--bind", "127.0.0.1", "--dir", os.path.join(d, str(p)), "--save", "",
                     "--appendonly", "no", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            deadline = time.monotonic() + 10
            for p in ports:
                while True:
                    try:
                        socket.create_connection(("127.0.0.1", p), timeout=1).close()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            print("cluster_smoke: redis-server did not start", file=sys.stderr)
                            return 1
                        time.sleep(0.05)
            nodes = ["127.0.0.1:%d" % p for p in ports]
            subprocess.run([cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
                           check=True, stdout=subprocess.DEVNULL)
            while b"cluster_state:ok" not in subprocess.run([cli, "-p", str(ports[0]), "cluster", "info"],
                                                           capture_output=True).stdout:
                if time.monotonic() > deadline + 20:
                    print("cluster_smoke: the cluster did not form", file=sys.stderr)
                    return 1
                time.sleep(0.05)
            # Queues on masters of their own, then one queue over two shards.
            for counts in (["--queues", "1,2"], ["--shards", "2"]):
                rc = subprocess.run([sys.executable, check, "cluster", "--", bench, "cluster", "--broker",
                                     "redis+cluster://" + ",".join(nodes), *counts, "--jobs", "200",
                                     "--json"]).returncode
                if rc != 0:
                    return rc
            return 0
        finally:
            for s in servers:
                s.kill()
                s.wait()


if __name__ == "__main__":
    sys.exit(main())
